"""Crystal compilation: threshold, settled units, extractive summary, digest."""

from __future__ import annotations

from dataclasses import replace

from orchmem.models.reflection.crystals import by_topic, compile_topic, digest, extractive
from orchmem.models.storage.reflection.units import StoredUnit

BASE = StoredUnit(row_id=1, memory_id="m1", type="Preference", content="", summary="",
                  importance=50, confidence=0.8, subject=None, value=None, stated=False,
                  reinforcements=0, fingerprint="f", created_at="2026-01-01", topic="about:tea#1")


def unit(n: int, content: str, **more: object) -> StoredUnit:
    return replace(BASE, memory_id=f"m{n}", content=content, fingerprint=f"f{n}",
                   created_at=f"2026-01-{n:02d}", **more)  # type: ignore[arg-type]


def _compile(units: list[StoredUnit], min_units: int = 3) -> object:
    return compile_topic("about:tea#1", units, min_units=min_units, summary_units=2,
                         low_confidence=0.5)


def test_below_the_threshold_there_is_no_crystal() -> None:
    assert _compile([unit(1, "a"), unit(2, "b")]) is None


def test_a_low_confidence_candidate_stays_episodic_until_reinforced() -> None:
    units = [unit(1, "Likes tea"), unit(2, "Tea every morning"),
             unit(3, "Maybe likes tea", confidence=0.3)]
    assert _compile(units) is None
    reinforced = [*units[:2], replace(units[2], reinforcements=1)]
    assert _compile(reinforced) is not None


def test_the_summary_quotes_the_highest_signal_units_oldest_first() -> None:
    units = [unit(1, "Likes tea.", importance=40), unit(2, "Green tea every morning.",
                                                         importance=90),
             unit(3, "Tea with honey", importance=70, reinforcements=1),
             unit(4, "A note", type="Fact", importance=10)]
    crystal = compile_topic("about:tea#1", units, min_units=3, summary_units=2,
                            low_confidence=0.5)
    assert crystal is not None
    assert crystal.content == "tea: Green tea every morning; Tea with honey"
    assert crystal.type == "Preference" and crystal.importance == 90
    assert crystal.unit_ids == ("m1", "m2", "m3", "m4")
    assert crystal.digest == digest(list(reversed(units)))
    changed = [*units[:3], replace(units[3], fingerprint="other")]
    assert compile_topic("about:tea#1", changed, min_units=3, summary_units=2,
                         low_confidence=0.5).digest != crystal.digest  # type: ignore[union-attr]


def test_a_summariser_can_be_plugged_in_and_units_group_by_topic() -> None:
    units = [unit(1, "a"), unit(2, "b"), unit(3, "c"), unit(4, "d", topic=None)]
    crystal = compile_topic("t", units[:3], min_units=3, summary_units=3, low_confidence=0.5,
                            summariser=lambda topic, texts: f"{topic}={len(texts)}")
    assert crystal is not None and crystal.content == "t=3"
    assert list(by_topic(units)) == ["about:tea#1"] and len(by_topic(units)["about:tea#1"]) == 3
    assert extractive("subject:identity:location", ["I live in Lisbon."]) == \
        "identity:location: I live in Lisbon"
