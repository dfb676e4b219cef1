"""The execution log, its episodes and the watermark, in the client's in-process mode
(the real task code and SQLite file, no broker)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings
from orchmem_testing import open_odb as odb_of

from orchmem.models.execlog.episodes import similar_episodes
from orchmem.models.execlog.rules import event_id_for
from orchmem.models.storage.execlog.entries import events_of_memory, read_log, run_of
from orchmem.models.storage.execlog.watermark import lag_warnings, projection_status
from orchmem.models.storage.visibility import View
from orchmem.worker import MemoryClient

ORCH = "log-bot"


@pytest.fixture
def memory(tmp_path: Path) -> MemoryClient:
    return MemoryClient(ORCH, make_settings(tmp_path / "root", ""), immediate=True)


PARSER = "The parser crashes on empty input. Find the cause."


def a_run(memory: MemoryClient, name: str = "triage ticket 42", prompt: str = PARSER,
          **kwargs: Any) -> Any:
    with memory.run(name, conversation_id="c-42", **kwargs) as run:
        with run.step("plan", "Plan the fix") as step:
            step.prompt(prompt, actor="planner")
            step.tool_call("search_tickets", data={"q": "parser"}, idempotency_key="t-1",
                           actor="planner")
            handle = step.write_back(workflow_output={
                "output": {"decisions": ["Patch the parser to accept empty input"]}})
            assert handle.wait(30)["ok"]
        run.checkpoint("s3://state/42.json", schema_version=1)
        run.outcome("fixed", "The parser accepts empty input now.")
    return run


def test_a_run_is_logged_in_order_with_digests_versions_and_its_run_row(
        memory: MemoryClient) -> None:
    run = a_run(memory)
    results = run.wait()
    assert all(r and r["ok"] for r in results)
    # the step's events up to its write-back went with it (one transaction), the rest
    # of the step at its end; the run's own events one by one
    assert [r.get("log", r)["appended"] for r in results if r] == [1, 3, 1, 1, 1, 1]
    assert "log" in results[1] and results[1]["memoryIds"]
    events, cursor = read_log(odb_of(memory), run_id=run.run_id)
    assert cursor is None
    assert [e["kind"] for e in events] == ["run_start", "step_start", "prompt", "tool_call",
                                           "step_end", "checkpoint", "outcome", "run_end"]
    prompt = events[2]
    assert len(prompt["digest"]) == 64 and prompt["text"].startswith("The parser crashes")
    assert prompt["parentId"] == events[1]["eventId"] and prompt["stepId"] == "plan"
    assert {e["schemaVersion"] for e in events} == {1}
    assert events[5]["checkpointRef"] == "s3://state/42.json"
    assert events[5]["checkpointSchemaVersion"] == 1
    assert events[3]["eventId"] == event_id_for(ORCH, "t-1")
    row = run_of(odb_of(memory), run.run_id)
    assert row is not None and row["status"] == "projected" and row["events"] == 8
    assert row["outcome"] == "ok" and row["conversationId"] == "c-42"


def test_replaying_an_event_or_a_whole_run_appends_nothing(memory: MemoryClient) -> None:
    run = a_run(memory)
    before, _ = read_log(odb_of(memory), limit=1000)
    again = a_run(memory, run_id=run.run_id)  # the same run id: the same event keys
    results = again.wait()
    assert all(r and r["ok"] and r["duplicate"] for r in results)  # the same task keys
    # The same event in another request (another task key): replayed, not appended.
    event = {"runId": run.run_id, "kind": "tool_call", "name": "search_tickets",
             "idempotencyKey": "t-1"}
    result = memory.log_event(events=[event], idempotency_key="retry-1").wait(30)
    assert result is not None and not result["duplicate"]
    assert (result["appended"], result["replayed"]) == (0, 1)
    assert result["eventIds"] == [event_id_for(ORCH, "t-1")]
    after, _ = read_log(odb_of(memory), limit=1000)
    assert after == before


def test_a_memory_written_from_a_step_cites_its_log_events(memory: MemoryClient) -> None:
    run = a_run(memory)
    [node] = memory.recall("parser empty input").nodes[:1]
    assert node.memory.source.workflow_run_id == run.run_id
    assert node.memory.source.step_id == "plan"
    cited = events_of_memory(odb_of(memory), node.memory.memory_id)
    assert [e["kind"] for e in cited] == ["step_start", "prompt", "tool_call", "step_end"]


def test_an_ended_run_becomes_an_episode_that_recall_returns_for_a_similar_case(
        memory: MemoryClient) -> None:
    run = a_run(memory)
    a_run(memory, "renew the TLS certificate", "The certificate of the web site expires soon.")
    [episode, *_] = similar_episodes(odb_of(memory), "parser crash with empty input",
                                     view=View(session_id="c-42"))
    assert episode["runId"] == run.run_id
    assert (episode["scope"], episode["sessionId"]) == ("session", "c-42")
    assert episode["tools"] == ["search_tickets"] and episode["participants"] == ["planner"]
    assert episode["outcome"] == "ok" and episode["summarizer"] == "extractive-1"
    assert "The parser crashes on empty input." in episode["summary"]
    assert episode["memoryCount"] == 1 and len(episode["memoryIds"]) == 1
    bundle = memory.recall("parser crash with empty input", episodes=True,
                           session_id="c-42")
    assert bundle.episodes[0]["runId"] == run.run_id
    assert memory.recall("parser crash").episodes == []


@pytest.mark.parametrize(("event", "path", "code"), [
    ({"kind": "checkpoint", "checkpoint": {"ref": "s3://x", "schemaVersion": 7}},
     "events.0.checkpoint.schemaVersion", "validation"),
    ({"kind": "note", "text": "x" * 4001}, "events.0.text", "validation"),
    ({"kind": "note", "data": {"blob": "y" * 20_000}}, "events.0.data", "validation"),
    ({"kind": "checkpoint"}, "events.0", "validation"),
    ({"kind": "launch"}, "events.0.kind", "validation"),
    ({"kind": "note", "digest": "abc"}, "events.0.digest", "validation"),
])
def test_bad_events_are_refused_naming_the_field_and_nothing_is_logged(
        memory: MemoryClient, event: dict[str, Any], path: str, code: str) -> None:
    run_id = memory.run().run_id
    handle = memory.log_event(events=[{"runId": run_id, **event}])
    assert not handle.ok and handle.error == code
    assert path in [e["path"] for e in handle.errors]
    assert read_log(odb_of(memory)) == ([], None)


def test_events_that_are_not_a_list_are_refused_not_raised(memory: MemoryClient) -> None:
    handle = memory.log_event(events="run started")  # type: ignore[arg-type]
    assert not handle.ok and handle.error == "validation"
    assert handle.errors[0]["path"] == "events"


def test_a_run_id_of_another_orchestrator_is_a_scope_violation(memory: MemoryClient,
                                                               tmp_path: Path) -> None:
    other = MemoryClient("other-bot", make_settings(tmp_path / "root", ""), immediate=True)
    foreign = other.run().run_id
    handle = memory.log_event(events=[{"runId": foreign, "kind": "note", "text": "hi"}])
    assert not handle.ok and handle.error == "scope_violation"
    bad = memory.log_event(events=[{"runId": "run-1", "kind": "note"}])
    assert not bad.ok and bad.error == "validation"
    assert bad.errors[0]["path"] == "events.0.runId"


def test_the_log_pages_by_cursor_and_by_recorded_time(memory: MemoryClient) -> None:
    run_id = memory.run().run_id
    events = [{"runId": run_id, "kind": "note", "text": f"note {n}",
               "idempotencyKey": f"n-{n}"} for n in range(25)]
    assert memory.log_event(events=events).wait(30)["appended"] == 25
    odb = odb_of(memory)
    seen, cursor = [], 0
    while True:
        page, cursor = read_log(odb, after=cursor or 0, limit=10)
        seen += [e["text"] for e in page]
        if cursor is None:
            break
    assert seen == [f"note {n}" for n in range(25)]
    last = read_log(odb, limit=100)[0][-1]
    assert [e["text"] for e in read_log(odb, since=last["recordedAt"])[0]] == \
        [e["text"] for e in read_log(odb)[0] if e["recordedAt"] >= last["recordedAt"]]
    assert read_log(odb, since="2999-01-01T00:00:00.000000Z") == ([], None)


def test_replay_mode_is_recorded_on_the_run_and_its_events(memory: MemoryClient) -> None:
    with memory.run("replay of 42", replay=True) as run:
        run.step("plan").__enter__().tool_call("send_email", idempotency_key="mail-1")
    assert all(r and r["ok"] for r in run.wait())
    events, _ = read_log(odb_of(memory), run_id=run.run_id)
    assert all(e["replay"] for e in events)
    row = run_of(odb_of(memory), run.run_id)
    assert row is not None and row["replay"]


def test_stats_watermark_reports_each_projection_and_recall_warns_past_the_bound(
        memory: MemoryClient) -> None:
    a_run(memory)
    odb = odb_of(memory)
    status = projection_status(odb)
    # the run's 8 events and the snapshot of the memory its step wrote (tape.py)
    assert status["log"]["seq"] == 9 and status["log"]["schemaVersion"] == 1
    assert status["episodes"]["behindRuns"] == 0 and status["episodes"]["watermarkSeq"] == 9
    assert status["vectors"]["behindMemories"] == 0 and status["fts"]["behindMemories"] == 0
    # A run that ended, then got one more event: its episode is stale until projected.
    with sqlite3.connect(odb.workspace.db_path) as conn:
        conn.execute("UPDATE log_runs SET status = 'ended'")
    conn.close()
    assert projection_status(odb)["episodes"]["behindRuns"] == 1
    odb.cache.pop("recall_lags", None)  # counted at most every few seconds otherwise
    assert lag_warnings(odb, 0) == ["episodes lag the execution log by 1 runs "
                                    "(memory.log.max_projection_lag = 0)"]
    assert lag_warnings(odb, 1) == []
    bundle = memory.recall("parser")
    assert not any("episodes lag" in w for w in bundle.warnings)
    assert bundle.watermark == {"logSeq": 9, "episodesBehindRuns": 1,
                                "vectorsBehindMemories": 0, "schemaVersion": 1}
    odb.memory.log.max_projection_lag = 0
    odb.cache.pop("recall_lags", None)
    assert any("episodes lag the execution log by 1 runs" in w
               for w in memory.recall("parser").warnings)
