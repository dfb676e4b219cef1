"""Replay safety through the real worker: a tool call is asked for by its idempotency
key before its side effect (``run.recorded``, across runs), a replay refuses tools not on
its allowlist and logs the refusal, and compensation hooks undo a failed or rolled-back
run's tool calls, each logged."""

from __future__ import annotations

from typing import Any

import pytest

from orchmem.config import MemoryValidationError, ReplayRefused, Settings
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.execlog.entries import read_log
from orchmem.worker import MemoryClient

pytestmark = pytest.mark.usefixtures("worker")
TIMEOUT = 60


def _log(settings: Settings, orch_id: str, run_id: str) -> list[dict[str, Any]]:
    odb = Databases(settings, readonly=True).open(orch_id, create=False)
    assert odb is not None
    return list(read_log(odb, run_id=run_id, limit=1000)[0])


def test_a_tool_call_is_found_by_its_key_in_a_later_run(
        settings: Settings, app: Any, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    key = f"{orch_id}-charge-42"
    sent: list[str] = []
    with memory.run("charge") as first, first.step("pay") as step:
        assert first.recorded(key) is None
        step.tool_call("charge_card", data={"amount": 42}, idempotency_key=key)
        sent.append("charge")
        pending = first.recorded(key)  # made, not written yet: still found
        assert pending is not None and pending["name"] == "charge_card"
    assert all(r and r["ok"] for r in first.wait(TIMEOUT))

    with memory.run("charge", replay=True) as again:  # another run, as a retry would be
        found = again.recorded(key)
        assert found is not None and found["runId"] == first.run_id
        assert (found["kind"], found["name"], found["data"]) == \
            ("tool_call", "charge_card", {"amount": 42})
        assert found["eventId"] == pending["eventId"]
        if found is None:
            sent.append("charge")  # the side effect a missing record would repeat
    assert sent == ["charge"] and memory.recorded(f"{orch_id}-never") is None


def test_a_replay_refuses_a_tool_not_on_its_allowlist_and_logs_it(
        settings: Settings, app: Any, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    executed: list[str] = []
    with memory.run("deploy", replay=True, allowlist=["read_config"]) as run, \
            run.step("apply") as step:
        step.tool_call("read_config", data={"file": "app.toml"})
        executed.append("read_config")
        with pytest.raises(ReplayRefused, match="kubectl_apply"):
            step.tool_call("kubectl_apply", data={"manifest": "app.yaml"})
            executed.append("kubectl_apply")
    assert executed == ["read_config"]
    run.wait(TIMEOUT)
    events = _log(settings, orch_id, run.run_id)
    [mode] = [e for e in events if e["kind"] == "replay_mode"]
    assert mode["data"]["allowlist"] == ["read_config"]
    calls = [(e["name"], e.get("status"), e.get("data")) for e in events
             if e["kind"] == "tool_call"]
    assert calls == [("read_config", None, {"file": "app.toml"}),
                     ("kubectl_apply", "refused", {"refused": "not on the replay allowlist"})]
    # outside replay mode, or in one without an allowlist, nothing is refused
    with memory.run("deploy", replay=True) as free, free.step("apply") as step:
        step.tool_call("kubectl_apply")


@pytest.mark.parametrize("allowlist, field", [("kubectl", "allowlist"),
                                              (["ok", 3], "allowlist.1"),
                                              ([""], "allowlist.0"),
                                              ({"a": 1}, "allowlist")])
def test_an_allowlist_that_is_not_a_list_of_names_is_refused_naming_the_field(
        settings: Settings, app: Any, orch_id: str, allowlist: Any, field: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    with pytest.raises(MemoryValidationError) as caught:
        memory.run("deploy", replay=True, allowlist=allowlist)
    assert caught.value.errors[0]["path"] == field
    # the worker's door checks the same field in a replay_mode event
    with memory.run("deploy") as run:
        bad = memory.log_event(events=[{"runId": run.run_id, "kind": "replay_mode",
                                        "status": "on", "data": {"allowlist": allowlist}}])
    assert not bad.ok and bad.errors[0]["path"] == f"events.0.data.{field}"
    run.wait(TIMEOUT)
    assert [e["kind"] for e in _log(settings, orch_id, run.run_id)] == ["run_start", "run_end"]
    log = memory.databases.workspace(orch_id).log_path.read_text()
    assert "allowlist" in log


def test_a_failed_run_compensates_its_tool_calls_newest_first_and_logs_them(
        settings: Settings, app: Any, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    undone: list[tuple[str, Any]] = []

    def broken(call: dict[str, Any]) -> None:
        raise RuntimeError("the queue is gone")

    with pytest.raises(TimeoutError), memory.run("provision", compensations={
            "create_vm": lambda call: undone.append(("create_vm", call["data"]))}) as run:
        run.on_compensate("attach_disk", lambda call: undone.append(("attach_disk",
                                                                     call["data"])))
        run.on_compensate("notify", broken)
        with run.step("make") as step:
            vm = step.tool_call("create_vm", data={"name": "vm-1"})
            disk = step.tool_call("attach_disk", data={"size": 10})
            note = step.tool_call("notify", data={"to": "ops"})
            step.tool_call("log_metric")
        raise TimeoutError("the disk never attached")
    assert undone == [("attach_disk", {"size": 10}), ("create_vm", {"name": "vm-1"})]
    run.wait(TIMEOUT)
    events = _log(settings, orch_id, run.run_id)
    done = [(e["name"], e["status"], e["parentId"]) for e in events
            if e["kind"] == "compensation"]
    assert [d[:2] for d in done] == [("log_metric", "skipped"), ("notify", "error"),
                                     ("attach_disk", "ok"), ("create_vm", "ok")]
    assert [d[2] for d in done[1:]] == [note, disk, vm]
    assert events[-1]["kind"] == "run_end" and events[-1]["status"] == "error"

    with memory.run("provision") as ok_run:  # a run that succeeds compensates nothing
        ok_run.on_compensate("create_vm", lambda call: undone.append(("again", call)))
        ok_run.step("make").tool_call("create_vm")
    assert len(undone) == 2
    assert ok_run.rollback("operator asked") and len(undone) == 3
    assert ok_run.rollback() == []  # compensated once
