"""The as-of test, the as_of check, the time window's favour and substance for a question
about when (pure functions)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from orchmem.config import MemoryValidationError
from orchmem.models.core.validity import check_as_of, valid_at
from orchmem.models.recall.plans import boost_window, in_window, weigh_substance
from orchmem.models.recall.ranking import Modifiers, Ranked
from orchmem.models.recall.router import Intent, Plan
from orchmem.models.storage.search import reads as recall_reads

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
T = "2024-05-01T00:00:00.000000Z"
BEFORE, AFTER = "2024-04-01T00:00:00.000000Z", "2024-05-15T00:00:00.000000Z"


def at(when: str | None, known: str | None = None, **row: str | None) -> bool:
    fields: dict[str, str | None] = {"status": "active", "created_at": BEFORE,
                                     "updated_at": BEFORE, "valid_from": None,
                                     "valid_to": None, **row}
    return valid_at(when, known=known, **fields)  # type: ignore[arg-type]


def test_valid_and_known_at() -> None:
    assert at(T)  # stored before, open window
    assert not at(T, created_at=AFTER)  # said later, no validFrom: true since said
    # true then, learnt later: valid time sees it, transaction time does not
    assert at(T, created_at=AFTER, valid_from=BEFORE)
    assert not at(T, T, created_at=AFTER, valid_from=BEFORE)
    assert not at(None, T, created_at=AFTER, valid_from=BEFORE)
    assert at(None, AFTER, created_at=AFTER, valid_from=BEFORE)
    # known at T: a memory superseded after T was what we believed then, not one before
    assert at(None, T, status="superseded", updated_at=AFTER)
    assert not at(None, AFTER, status="superseded", updated_at=T)
    assert not at(None, T, status="retracted")
    assert not at(T, valid_from=AFTER)  # not true yet
    assert at(T, valid_to=AFTER) and not at(T, valid_to=T) and not at(T, valid_to=BEFORE)
    assert not at(T, status="retracted")
    # Superseded before schema 4 (no validTo): the supersede time closes it.
    assert at(T, status="superseded", updated_at=AFTER)
    assert not at(T, status="superseded", updated_at=BEFORE)


def test_check_as_of() -> None:
    assert check_as_of(None, NOW) is None
    assert check_as_of("2024-05-01T00:00:00Z", NOW) == T
    assert check_as_of(datetime(2024, 5, 1, tzinfo=UTC), NOW) == T
    assert check_as_of(NOW + timedelta(seconds=2), NOW)  # clock skew is tolerated
    for bad in ("2024-05-01", "yesterday", NOW + timedelta(hours=1), datetime(2024, 5, 1), 7):
        with pytest.raises(MemoryValidationError, match="as_of") as caught:
            check_as_of(bad, NOW)  # type: ignore[arg-type]
        assert caught.value.errors[0]["path"] == "as_of"


def row(created: str, valid_from: str | None = None, refs: list[dict[str, str]] | None = None,
        content: str = "") -> tuple[object, ...]:
    cells: list[object] = [None] * (recall_reads.TIME_REFS + 1)
    cells[recall_reads.CREATED_AT], cells[recall_reads.VALID_FROM] = created, valid_from
    cells[recall_reads.CONTENT] = content
    cells[recall_reads.TIME_REFS] = json.dumps(refs) if refs else None
    return tuple(cells)


def test_in_window() -> None:
    may = (date(2024, 5, 1), date(2024, 5, 31))
    assert in_window(row("2024-05-10T10:00:00.000000Z"), may)
    assert in_window(row("2024-07-01T00:00:00.000000Z", "2024-05-31T23:00:00.000000Z"), may)
    assert not in_window(row("2024-04-30T23:59:59.000000Z"), may)
    refs = [{"text": "last week", "from": "2024-04-29", "to": "2024-05-05"}]
    assert in_window(row("2024-06-09T00:00:00.000000Z", refs=refs), may)  # the phrase overlaps


def ranked(memory_id: str, score: float) -> Ranked:
    return Ranked(memory_id, score, score, None, None, Modifiers(1.0, 1.0, 1.0, 1.0))


def test_a_window_favours_what_it_covers_and_a_when_question_what_is_dated() -> None:
    rows = {"in": row("2024-05-10T00:00:00.000000Z"), "out": row("2024-03-10T00:00:00.000000Z"),
            "dated": row("2024-03-10T00:00:00.000000Z",
                          refs=[{"text": "1 May", "from": "2024-05-01", "to": "2024-05-01"}])}
    items = [ranked("out", 1.0), ranked("dated", 0.9), ranked("in", 0.8)]
    window = Plan(Intent.ENTITY_TIME, window=(date(2024, 5, 1), date(2024, 5, 31)),
                  window_boost=0.5)
    assert [r.memory_id for r in boost_window(items, rows, window)] == ["dated", "in", "out"]
    when = Plan(Intent.ENTITY_TIME, dated_boost=0.3)
    assert [r.memory_id for r in boost_window(items, rows, when)] == ["dated", "out", "in"]
    assert boost_window(items, rows, Plan(Intent.SEMANTIC)) == items


class _OutsideSnapshot:
    """A file asked only for its snapshot's memo, outside any snapshot (no row cache);
    anything else it is asked is a read, and fails."""

    def memo(self) -> None:
        return None


def test_a_question_about_when_keeps_a_terse_memory_that_names_a_day() -> None:
    tomorrow = [{"text": "tomorrow", "from": "2024-05-11", "to": "2024-05-11"}]
    rows = {"dated": row(T, refs=tomorrow, content="Joanna: Alright, see you tomorrow!"),
            "terse": row(T, content="Joanna: Alright, see you!"),
            "states": row(T, content="Nate: I will give the turtles a bath before you come.")}
    items = [ranked("dated", 1.0), ranked("terse", 0.9), ranked("states", 0.8)]
    odb: Any = _OutsideSnapshot()  # every content is in rows: nothing is read
    shape = {"asks_factor": 0.6, "terse_factor": 0.6, "dated_substance": True}
    when = weigh_substance(odb, items, rows, Plan(Intent.ENTITY_TIME, dated_boost=0.3, **shape))
    assert [(r.memory_id, r.score) for r in when] == [
        ("dated", 1.0), ("states", 0.8), ("terse", pytest.approx(0.54))]
    # Not a question about when, or the rule off: a terse memory is lowered, dated or not.
    for other in (Plan(Intent.SEMANTIC, **shape),
                  Plan(Intent.ENTITY_TIME, dated_boost=0.3, asks_factor=0.6, terse_factor=0.6)):
        assert [r.memory_id for r in weigh_substance(odb, items, rows, other)] == [
            "states", "dated", "terse"]
