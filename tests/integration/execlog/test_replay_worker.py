"""Replaying an existing run through the real worker: each replay is logged in full,
marked ``replay``, keyed in its own attempt beside the original run's events, and the
run records every replay (a ``replay_mode`` event per attempt); a step's events reach
the log also when the step is not used as a context manager."""

from __future__ import annotations

from typing import Any

import pytest

from orchmem.config import Settings
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.execlog.entries import read_log, run_of
from orchmem.worker import MemoryClient
from orchmem.worker.client.runlog import RunLog
from orchmem.worker.runtime.app import OrchmemCelery

pytestmark = pytest.mark.usefixtures("worker")
TIMEOUT = 60


def _steps(run: RunLog, orch_id: str, recipient: str) -> None:
    with run.step("notify") as step:
        step.prompt("Tell the customer the refund went out.")
        step.tool_call("send_email", data={"to": recipient},
                       idempotency_key=f"{orch_id}-mail")


def _log(settings: Settings, orch_id: str, run_id: str) -> list[dict[str, Any]]:
    odb = Databases(settings, readonly=True).open(orch_id, create=False)
    assert odb is not None
    return list(read_log(odb, run_id=run_id, limit=1000)[0])


def test_each_replay_of_an_existing_run_is_logged_and_recorded(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    with memory.run("refund") as run:
        _steps(run, orch_id, "ana@example.com")
    assert all(r and r["ok"] for r in run.wait(TIMEOUT))
    original = _log(settings, orch_id, run.run_id)
    assert not any(e["replay"] for e in original)

    attempts = []
    for recipient in ("ana@example.com", "bruno@example.com"):  # the second one diverges
        with memory.run("refund", run_id=run.run_id, replay=True) as again:
            _steps(again, orch_id, recipient)
        results = again.wait(TIMEOUT)
        assert all(r and r["ok"] and not r["duplicate"] for r in results), results
        assert sum(r.get("log", r)["appended"] for r in results if r) == 7, results
        attempts.append(again.attempt)
    events = _log(settings, orch_id, run.run_id)
    assert events[:len(original)] == original  # the original run is untouched
    replayed = events[len(original):]
    assert len(replayed) == 14 and all(e["replay"] for e in replayed)
    modes = [e for e in replayed if e["kind"] == "replay_mode"]
    assert [m["data"]["attempt"] for m in modes] == attempts and len(set(attempts)) == 2
    sent = [e["data"]["to"] for e in replayed if e["kind"] == "tool_call"]
    assert sent == ["ana@example.com", "bruno@example.com"]
    odb = Databases(settings, readonly=True).open(orch_id, create=False)
    assert odb is not None
    row = run_of(odb, run.run_id)
    assert row is not None and row["replay"]


def test_set_replay_in_a_rerun_logs_what_follows_it(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    with memory.run("refund") as run:
        _steps(run, orch_id, "ana@example.com")
    assert all(r and r["ok"] for r in run.wait(TIMEOUT))
    before = len(_log(settings, orch_id, run.run_id))
    with memory.run("refund", run_id=run.run_id) as again:  # a retry: same keys
        again.set_replay(True)
        _steps(again, orch_id, "ana@example.com")
    assert all(r and r["ok"] for r in again.wait(TIMEOUT))
    after = _log(settings, orch_id, run.run_id)
    kinds = [e["kind"] for e in after[before:]]
    assert kinds == ["replay_mode", "step_start", "prompt", "tool_call", "step_end",
                     "run_end"], kinds
    assert all(e["replay"] for e in after[before:])


def test_a_step_used_without_with_loses_no_event(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    with memory.run("ship") as run:
        run.step("build").tool_call("compile", data={"target": "arm64"})
        entered = run.step("upload").__enter__()  # entered, never left
        entered.tool_call("upload_artifact", data={"bucket": "releases"})
    assert all(r and r["ok"] for r in run.wait(TIMEOUT))
    events = _log(settings, orch_id, run.run_id)
    calls = [(e["kind"], e["name"], e["stepId"]) for e in events if e["kind"] == "tool_call"]
    assert calls == [("tool_call", "compile", "build"),
                     ("tool_call", "upload_artifact", "upload")], events
    assert [e["kind"] for e in events][-1] == "run_end"
    # without a run block either: the step's event is sent when it is made
    loose = memory.run("ship again")
    loose.step("build").tool_call("compile", data={"target": "x86"})
    assert all(r and r["ok"] for r in loose.wait(TIMEOUT))
    assert [e["name"] for e in _log(settings, orch_id, loose.run_id)] == ["compile"]
