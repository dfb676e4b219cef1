"""Evolves proposal rules: replaces, challenges, refines; linked pairs and fingerprints."""

from __future__ import annotations

from dataclasses import replace

from orchmem.models.reflection.evolves import auto_applies, fingerprint, propose, relation_of
from orchmem.models.storage.reflection.units import StoredUnit

BASE = StoredUnit(row_id=1, memory_id="m1", type="Fact", content="", summary="",
                  importance=50, confidence=0.8, subject=None, value=None, stated=False,
                  reinforcements=0, fingerprint="f1", created_at="2026-01-01", topic="t")


def unit(memory_id: str, content: str, at: str, **more: object) -> StoredUnit:
    return replace(BASE, memory_id=memory_id, content=content, created_at=at,
                   fingerprint=f"fp-{content}", **more)  # type: ignore[arg-type]


def test_a_stated_new_value_of_a_slot_replaces_and_an_inferred_one_challenges() -> None:
    old = unit("m1", "I live in Lisbon", "2026-01-01", subject="identity:location",
               value="lisbon")
    new = unit("m2", "I live in Porto", "2026-02-01", subject="identity:location",
               value="porto", stated=True)
    assert relation_of(new, old, 0.5) == ("replaces", "restates identity:location with "
                                          "another value", 0.9)
    inferred = replace(new, stated=False)
    assert relation_of(inferred, old, 0.5)[0] == "challenges"  # type: ignore[index]


def test_a_broad_slot_needs_close_vectors() -> None:
    old = unit("m1", "I prefer tea", "2026-01-01", subject="prefer", value="tea")
    new = unit("m2", "I prefer window seats", "2026-02-01", subject="prefer",
               value="window seats", stated=True)
    assert relation_of(new, old, 0.3) is None
    assert relation_of(new, old, 0.8) is not None


def test_close_texts_with_other_numbers_replace_when_they_say_it_changed() -> None:
    old = unit("m1", "The billing service runs on port 8080", "2026-01-01")
    moved = unit("m2", "The billing service now runs on port 9090", "2026-02-01")
    other = unit("m3", "The billing service runs on port 9090", "2026-02-01")
    assert relation_of(moved, old, 0.78)[0] == "replaces"  # type: ignore[index]
    assert relation_of(other, old, 0.9)[0] == "challenges"  # type: ignore[index]
    assert relation_of(other, old, 0.5) is None


def test_a_negation_challenges_and_a_longer_restatement_refines() -> None:
    old = unit("m1", "The user likes green tea in the morning", "2026-01-01")
    negated = unit("m2", "The user does not like green tea in the morning", "2026-02-01")
    longer = unit("m3", "The user likes green tea in the morning with honey", "2026-02-01")
    unrelated = unit("m4", "The user likes green tea", "2026-02-01")
    assert relation_of(negated, old, 0.85)[0] == "challenges"  # type: ignore[index]
    assert relation_of(longer, old, 0.9)[0] == "refines"  # type: ignore[index]
    assert relation_of(unrelated, old, 0.9) is None


def test_propose_skips_linked_pairs_and_known_fingerprints_and_only_looks_back() -> None:
    old = unit("m1", "The billing service runs on port 8080", "2026-01-01")
    new = unit("m2", "The billing service now runs on port 9090", "2026-02-01")

    def cosine(a: str, b: str) -> float:
        return 0.8

    found = propose([new, old], [old, new], cosine, set(), set())
    assert [(p.relation, p.newer_id, p.older_id) for p in found] == [
        ("replaces", "m2", "m1")]
    assert found[0].fingerprint == fingerprint(new, old)
    assert propose([new], [old, new], cosine, {("m2", "m1")}, set()) == []
    assert propose([new], [old, new], cosine, set(), {fingerprint(new, old)}) == []


def test_only_auto_mode_applies_and_only_over_the_threshold() -> None:
    old = unit("m1", "I live in Lisbon", "2026-01-01", subject="identity:location", value="a")
    new = unit("m2", "I live in Porto", "2026-02-01", subject="identity:location", value="b",
               stated=True)
    proposal = propose([new], [old], lambda a, b: 0.5, set(), set())[0]
    assert not auto_applies(proposal, "shadow", 0.5)
    assert auto_applies(proposal, "auto", 0.9)
    assert not auto_applies(proposal, "auto", 0.95)
