"""*What happened?* reads the execution log, through the real worker: the events of
the runs a what-happened recall is about come in ``bundle.log``, chronological and
paginated; a run of another session is never read; when the projections lag past
``memory.log.max_projection_lag`` the log answers directly and the warnings say so."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from orchmem_testing import WorkerProcess

from orchmem.config import MemoryValidationError, Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.recall.bundle import RecallBundle
from orchmem.worker import MemoryClient


def _run(client: MemoryClient, decision: str, session: str | None = None) -> str:
    """A run of one step that decides ``decision``; its run id."""
    with client.run("release", session_id=session) as run:
        with run.step("plan") as step:
            step.prompt(f"Plan: {decision}")
            step.tool_call("search_tickets", data={"q": decision})
            step.write_back(workflow_output={"output": {"decisions": [decision]}})
        run.outcome("success", "released")
    assert all(v is not None and v.get("ok") for v in run.wait(60)), decision
    return run.run_id


def _recall(orch_id: str, settings: Settings, query: str, **options: Any) -> RecallBundle:
    """One recall by a client of ``settings``, closed after it (its helper threads too)."""
    with MemoryClient(orch_id, settings) as client:
        return client.recall(query, **options)


def _with_lag_bound(settings: Settings, bound: int) -> Settings:
    log = settings.memory.log.model_copy(update={"max_projection_lag": bound})
    return settings.model_copy(update={"memory": settings.memory.model_copy(
        update={"log": log})})


def test_what_happened_returns_the_log_events_of_its_runs(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    canary = _run(client, "Ship the canary build of the billing service on Monday")
    hidden_run = _run(client, "Ship the canary build of the search service", session="s-x")
    plain = client.recall("which canary build do we ship", route=True)
    assert plain.log is None and "sources" not in (plain.plan or {})
    happened = client.recall("what happened with the canary build?", route=True)
    assert happened.plan is not None and happened.plan["intent"] == "what_happened"
    assert happened.log is not None and happened.log["runs"] == [canary]
    events = happened.log["events"]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert {e["runId"] for e in events} == {canary}
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_start" and "run_end" in kinds
    assert [s["source"] for s in happened.plan["sources"]] == ["memories", "log"]
    # paginated: the pages, read in turn, are the whole run's events once each
    pages, after = [], 0
    small = _with_lag_bound(settings, 10**6)
    small = small.model_copy(update={"memory": small.memory.model_copy(update={
        "log": small.memory.log.model_copy(update={"answer_max_events": 2})})})
    while True:
        page = _recall(orch_id, small, "what happened with the canary build?", route=True,
                       log_after=after).log
        assert page is not None and len(page["events"]) <= 2
        pages += page["events"]
        if page["next"] is None:
            break
        after = page["next"]
    assert [e["seq"] for e in pages] == [e["seq"] for e in events]
    # the log is added beside the memories: without it, the same memories in the same order
    off = small.model_copy(update={"memory": small.memory.model_copy(update={
        "log": small.memory.log.model_copy(update={"answer_max_events": 0})})})
    without = _recall(orch_id, off, "what happened with the canary build?", route=True)
    assert without.log is None and without.memory_ids == happened.memory_ids
    with pytest.raises(MemoryValidationError, match="logAfter"):
        client.recall("what happened with the canary build?", log_after=-1)
    named = client.recall("canary build", run_id=canary)
    assert named.log is not None and named.log["runs"] == [canary]
    assert named.memory_ids and all(m in happened.memory_ids for m in named.memory_ids)
    hidden = client.recall("canary build", run_id=hidden_run)
    assert hidden.log == {"runs": [], "events": [], "next": None}
    seen = client.recall("canary build", run_id=hidden_run, session_id="s-x")
    assert seen.log is not None and seen.log["runs"] == [hidden_run]
    client.close()


def test_lagging_projections_answer_what_happened_from_the_log(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    lag_run = _run(client, "Rotate the database credentials")
    # the episode projection falls behind (as after a crash between the log's append and
    # its projection): the run is ended, its episode not projected
    with sqlite3.connect(client.databases.workspace(orch_id).db_path) as db:
        db.execute("UPDATE log_runs SET status = 'ended' WHERE run_id = ?", (lag_run,))
    db.close()
    answer = _recall(orch_id, _with_lag_bound(settings, 0),
                     "what happened with the credentials?", route=True)
    assert answer.watermark["episodesBehindRuns"] == 1, answer.watermark
    assert any("answered from the log directly" in w for w in answer.warnings)
    assert answer.log is not None and lag_run in answer.log["runs"]
    assert answer.plan is not None
    assert any("projections lag" in s["why"] for s in answer.plan["sources"])
    calm = _recall(orch_id, settings, "what happened with the credentials?", route=True)
    assert not any("answered from the log directly" in w for w in calm.warnings)
    client.close()
