"""The bulletin: deterministic, cited, bounded; Goal/Todo/Decision kept first when cut."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from orchmem.config.memory_settings import BulletinSettings
from orchmem.models.bulletin.compose import SECTIONS, Bulletin, compose
from orchmem.models.bulletin.facts import Conflict, Facts, Item
from orchmem.models.core.shapes import format_ts

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
TYPES = ["Identity", "Fact", "Event", "Observation", "Goal", "Todo", "Decision", "Preference"]


def item(i: int, memory_type: str, importance: int = 50, confidence: float = 0.9,
         days: int = 1, summary: str | None = None) -> Item:
    return Item(memory_id=f"m-00000000-{i:016x}", type=memory_type,
                summary=summary or f"{memory_type} number {i} with some words",
                importance=importance, confidence=confidence,
                created_at=format_ts(NOW - timedelta(days=days)))


def facts(n: int, seed: int = 0) -> Facts:
    rng = random.Random(seed)
    items = tuple(item(i, rng.choice(TYPES), rng.randint(0, 100), rng.random(),
                       rng.randint(0, 400)) for i in range(n))
    conflicts = tuple(Conflict(items[i], items[i + 1]) for i in range(0, min(n - 1, 6), 2))
    return Facts("orch-a", items, conflicts, watermark=42)


def test_same_input_gives_the_same_bulletin_byte_for_byte() -> None:
    limits = BulletinSettings()
    one = compose(facts(300), limits, NOW)
    shuffled = list(facts(300).items)
    random.Random(9).shuffle(shuffled)
    two = compose(Facts("orch-a", tuple(shuffled), facts(300).conflicts, 42), limits, NOW)
    assert one.to_text() == two.to_text()
    assert one.to_dict() == two.to_dict()


def test_sections_come_in_the_fixed_order() -> None:
    data = compose(facts(300), BulletinSettings(), NOW).to_dict()
    assert list(data["sections"]) == list(SECTIONS)


def test_every_line_cites_memory_ids_that_exist() -> None:
    source = facts(300)
    known = {i.memory_id for i in source.items}
    bulletin = compose(source, BulletinSettings(), NOW)
    lines = [line for lines in bulletin.sections.values() for line in lines]
    assert lines
    for line in lines:
        assert line.memory_ids and set(line.memory_ids) <= known
        assert line.render().endswith("]")


def test_limits_hold_for_every_section_and_the_total() -> None:
    limits = BulletinSettings(max_items_per_section=4, max_chars_per_section=300,
                              max_total_chars=900)
    bulletin = compose(facts(500), limits, NOW)
    assert len(bulletin.to_text()) <= 900
    for lines in bulletin.sections.values():
        assert len(lines) <= 4
        assert sum(len(line.render()) + 1 for line in lines) <= 300
    assert bulletin.truncated


def test_over_the_total_goal_todo_and_decision_lines_are_kept_first() -> None:
    items = [item(i, t, importance=90) for i, t in enumerate(
        ["Goal", "Todo", "Decision"] * 3 + ["Identity", "Fact", "Preference", "Event"] * 6)]
    source = Facts("orch-a", tuple(items), (), 1)
    roomy = compose(source, BulletinSettings(max_total_chars=100_000), NOW)
    tight = compose(source, BulletinSettings(max_total_chars=700), NOW)
    for name in ("active_goals", "open_todos", "recent_decisions"):
        assert tight.sections[name] == roomy.sections[name]
    assert len(tight.sections["knowledge_summary"]) < len(roomy.sections["knowledge_summary"])
    assert len(tight.to_text()) <= 700
    squeezed = compose(source, BulletinSettings(max_total_chars=200), NOW)
    assert squeezed.sections["knowledge_summary"] == []
    assert squeezed.sections["preference_profile"] == []


def test_conflicts_and_low_confidence_are_listed() -> None:
    new = item(1, "Fact", summary="The deadline is Monday")
    old = item(2, "Fact", summary="The deadline is Friday", days=3)
    shaky = item(3, "Preference", confidence=0.3, summary="Maybe likes jazz")
    bulletin = compose(Facts("o", (new, old, shaky), (Conflict(new, old),), 7),
                       BulletinSettings(), NOW)
    lines = bulletin.sections["conflicts_and_uncertainties"]
    assert lines[0].memory_ids == (new.memory_id, old.memory_id)
    assert "The deadline is Monday" in lines[0].text and "Friday" in lines[0].text
    assert lines[1].text.startswith("uncertain (0.30)")


def test_recent_decisions_are_newest_first_and_goals_by_importance() -> None:
    items = (item(1, "Decision", days=5), item(2, "Decision", days=1),
             item(3, "Goal", importance=20), item(4, "Goal", importance=95))
    bulletin = compose(Facts("o", items, (), 1), BulletinSettings(), NOW)
    assert [line.memory_ids[0] for line in bulletin.sections["recent_decisions"]] == [
        items[1].memory_id, items[0].memory_id]
    assert bulletin.sections["active_goals"][0].memory_ids[0] == items[3].memory_id


def test_json_round_trip_and_empty_bulletin() -> None:
    bulletin = compose(facts(50), BulletinSettings(), NOW)
    again = Bulletin.from_dict(bulletin.to_dict())
    assert again.to_text() == bulletin.to_text()
    empty = Bulletin.empty("o", format_ts(NOW))
    assert empty.to_text() == "(no memories yet)"
    assert all(v == [] for v in empty.to_dict()["sections"].values())


def test_conflicts_come_newest_first_and_a_conflicted_memory_is_not_also_uncertain() -> None:
    first_new = item(1, "Fact", confidence=0.2, days=2, summary="The venue is Lyon")
    first_old = item(2, "Fact", days=9, summary="The venue is Paris")
    second_new = item(3, "Fact", days=1, summary="The budget is 5k")
    second_old = item(4, "Fact", days=8, summary="The budget is 3k")
    shaky = item(5, "Fact", confidence=0.2, summary="Maybe a team dinner")
    source = Facts("o", (first_new, first_old, second_new, second_old, shaky),
                   (Conflict(first_new, first_old), Conflict(second_new, second_old)), 3)
    lines = compose(source, BulletinSettings(), NOW).sections["conflicts_and_uncertainties"]
    assert [line.memory_ids for line in lines] == [
        (second_new.memory_id, second_old.memory_id), (first_new.memory_id, first_old.memory_id),
        (shaky.memory_id,)]


def test_a_conflict_is_shown_once_in_words_with_when_each_side_was_said() -> None:
    new = item(1, "Fact", summary="The deadline is Monday", days=0)
    old = item(2, "Fact", summary="The deadline is Friday", days=1)
    other = item(3, "Fact", summary="The office is in Porto", days=2)
    bulletin = compose(Facts("o", (new, old, other), (Conflict(new, old),), 7),
                       BulletinSettings(), NOW)
    known = [line.memory_ids for line in bulletin.sections["knowledge_summary"]]
    assert known == [(other.memory_id,)]
    [line] = bulletin.sections["conflicts_and_uncertainties"]
    assert line.text == ("conflicting: The deadline is Monday (said just now) vs "
                         "The deadline is Friday (said yesterday)")
    assert bulletin.to_text().count("The deadline is Friday") == 1
