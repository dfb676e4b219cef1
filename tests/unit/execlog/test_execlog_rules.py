"""The execution log's rules without a database: run ids, event checks, episode text."""

from __future__ import annotations

from typing import Any

import pytest

from orchmem.config import MemoryValidationError, ScopeViolation
from orchmem.config.memory_settings import ExecLogSettings
from orchmem.models.execlog.episodes import first_sentence, summarize
from orchmem.models.execlog.rules import (
    check_log_request,
    check_run_id,
    digest_of,
    event_id_for,
    new_run_id,
)

LIMITS = ExecLogSettings(max_text_chars=10, max_data_chars=20, checkpoint_schema_versions=[1, 2])


def request(**event: Any) -> dict[str, Any]:
    return {"events": [{"runId": new_run_id("bot"), "kind": "note", **event}]}


def test_run_ids_belong_to_the_orchestrator_that_issued_them() -> None:
    run_id = new_run_id("bot")
    assert check_run_id(run_id, "bot") == run_id and run_id != new_run_id("bot")
    with pytest.raises(ScopeViolation, match="another orchestrator"):
        check_run_id(new_run_id("other"), "bot")
    for bad in ("run-1", "", None, run_id.upper()):
        with pytest.raises(MemoryValidationError, match="is not a run id"):
            check_run_id(bad, "bot")


def test_event_ids_follow_the_key_and_the_orchestrator() -> None:
    assert event_id_for("bot", "k1") == event_id_for("bot", "k1")
    assert event_id_for("bot", "k1") != event_id_for("bot", "k2")
    assert event_id_for("bot", "k1") != event_id_for("other", "k1")


@pytest.mark.parametrize(("event", "path"), [
    ({"text": "x" * 11}, "events.0.text"),
    ({"data": {"k": "v" * 30}}, "events.0.data"),
    ({"data": {"k": float("nan")}}, "events.0.data"),
    ({"kind": "checkpoint", "checkpoint": {"ref": "r", "schemaVersion": 3}},
     "events.0.checkpoint.schemaVersion"),
    ({"kind": "checkpoint", "checkpoint": {"ref": "r", "schemaVersion": "1"}},
     "events.0.checkpoint.schemaVersion"),
    ({"kind": "checkpoint", "checkpoint": {"ref": "r", "schemaVersion": 1, "parentId": "e-1"}},
     "events.0.checkpoint.parentId"),
    ({"at": "yesterday"}, "events.0.at"),
    ({"at": "2026-01-01T10:00:00"}, "events.0.at"),
    ({"stepId": "a\x00b"}, "events.0.stepId"),
    ({"surprise": 1}, "events.0.surprise"),
])
def test_a_bad_event_is_refused_naming_its_field(event: dict[str, Any], path: str) -> None:
    with pytest.raises(MemoryValidationError) as caught:
        check_log_request(request(**event), "bot", LIMITS)
    assert path in [e["path"] for e in caught.value.to_dict()["errors"]]


def test_good_events_pass_and_bounds_are_inclusive() -> None:
    ok = check_log_request(request(text="x" * 10, digest=digest_of("x" * 10)), "bot", LIMITS)
    assert ok.events[0].text == "x" * 10
    checkpoint = {"ref": "s3://s", "schemaVersion": 2, "parentId": event_id_for("bot", "c1")}
    assert check_log_request(request(kind="checkpoint", checkpoint=checkpoint), "bot",
                             LIMITS).events[0].checkpoint is not None
    with pytest.raises(MemoryValidationError):
        check_log_request({"events": []}, "bot", LIMITS)
    foreign = {"ref": "s3://s", "schemaVersion": 1, "parentId": event_id_for("other", "c1")}
    with pytest.raises(ScopeViolation, match=r"checkpoint\.parentId"):
        check_log_request(request(kind="checkpoint", checkpoint=foreign), "bot", LIMITS)


def test_an_episode_summary_is_sentences_of_the_run_itself_and_bounded() -> None:
    facts = {"actors": ["planner"], "tools": ["search"], "steps": ["plan", "fix"],
             "texts": {"prompt": first_sentence("Fix the parser. Then ship it."),
                       "outcome": "Shipped on Friday."}, "outcome": "ok", "events": 9}
    title, summary = summarize("ticket 42", facts)
    assert title == "ticket 42"
    assert summary == ("Fix the parser. Steps: plan, fix. Tools: search. "
                       "Outcome: ok. Shipped on Friday.")
    facts["texts"]["prompt"] = "word " * 400
    assert len(summarize(None, facts)[1]) <= 600
    assert first_sentence("x" * 300, 50).endswith("…")
