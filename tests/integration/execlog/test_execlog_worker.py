"""The execution log through the real worker: client → Redis → Celery → SQLite, and
``orchmem log`` reading it back a page at a time."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from orchmem.config import Settings
from orchmem.models.core.shapes import derive_id
from orchmem.models.execlog.episodes import similar_episodes
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.execlog.entries import read_log
from orchmem.worker import MemoryClient
from orchmem.worker.cli import main
from orchmem.worker.runtime.app import OrchmemCelery

pytestmark = pytest.mark.usefixtures("worker")
TIMEOUT = 60


def cli(settings: Settings, *args: str) -> Any:
    result = CliRunner().invoke(main, ["--root", str(settings.root), *args])
    return result


def test_a_run_through_the_worker_is_logged_once_and_becomes_an_episode(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    with memory.run("deploy the billing service") as run:
        with run.step("rollout") as step:
            step.prompt("Roll out billing 2.3 to the canary hosts first.", actor="deployer")
            step.tool_call("kubectl_apply", data={"manifest": "billing.yaml"},
                           idempotency_key=f"{orch_id}-apply", actor="deployer")
            step.write_back(workflow_output={"output": {"decisions": [
                "Billing 2.3 goes to the canary hosts first"]}})
        run.outcome("deployed", "Billing 2.3 runs on every host.")
    results = run.wait(TIMEOUT)
    assert all(r and r["ok"] for r in results), results
    # run_start; the step's first three events with its write-back; step_end; outcome;
    # run_end
    assert [r.get("log", r)["appended"] for r in results if r] == [1, 3, 1, 1, 1], results
    assert memory.wait_for_writes(TIMEOUT) == []
    odb = Databases(settings, readonly=True).open(orch_id, create=False)
    assert odb is not None
    events, _ = read_log(odb, run_id=run.run_id)
    assert [e["kind"] for e in events] == ["run_start", "step_start", "prompt", "tool_call",
                                           "step_end", "outcome", "run_end"]
    [episode] = similar_episodes(odb, "canary rollout of billing")
    assert episode["runId"] == run.run_id and episode["tools"] == ["kubectl_apply"]
    assert episode["memoryCount"] == 1
    # The same request again (a redelivery, a retrying caller): nothing appended.
    again = memory.log_event(events=[{"runId": run.run_id, "kind": "tool_call",
                                      "name": "kubectl_apply",
                                      "idempotencyKey": f"{orch_id}-apply"}]).wait(TIMEOUT)
    assert again is not None and again["ok"] and again["replayed"] == 1
    assert read_log(odb, run_id=run.run_id)[0] == events

    first = cli(settings, "log", "--orch", orch_id, "--limit", "4", "--json")
    assert first.exit_code == 0, first.output
    page = json.loads(first.output)
    assert [e["kind"] for e in page["events"]] == ["run_start", "step_start", "prompt",
                                                   "tool_call"]
    rest = json.loads(cli(settings, "log", "--orch", orch_id, "--run", run.run_id,
                          "--cursor", str(page["nextCursor"]), "--json").output)
    assert [e["kind"] for e in rest["events"]] == ["step_end", "outcome", "run_end"]
    assert rest["nextCursor"] is None
    text = cli(settings, "log", "--orch", orch_id, "--limit", "2").output
    assert "run_start" in text and "--cursor" in text
    assert cli(settings, "log", "--orch", orch_id, "--since", "soon").exit_code == 2


def test_a_steps_events_and_its_write_back_commit_together_or_not_at_all(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    unknown = derive_id("m", orch_id, "never-written", 0)
    with memory.run("file the incident") as run:
        with run.step("triage") as step:
            step.prompt("Which team owns the paging outage?", actor="triager")
            done = step.write_back(memories=[
                {"type": "Fact", "content": "The paging outage belongs to the SRE team"}]
            ).wait(TIMEOUT)
        with run.step("link") as linking:
            linking.prompt("Link it to the earlier incident.", actor="triager")
            refused = linking.write_back(
                memories=[{"type": "Fact", "key": "new",
                           "content": "The paging outage repeats the March incident"}],
                edges=[{"fromMemoryId": "new", "toMemoryId": unknown,
                        "edgeType": "RelatedTo"}]).wait(TIMEOUT)
    assert done is not None and done["ok"], done
    # one task, one receipt: the memory and the step's first two events
    assert done["log"]["appended"] == 2 and len(done["log"]["eventIds"]) == 2
    assert refused is not None and not refused["ok"], refused
    assert all(r is not None for r in run.wait(TIMEOUT))
    odb = Databases(settings, readonly=True).open(orch_id, create=False)
    assert odb is not None
    events, _ = read_log(odb, run_id=run.run_id)
    assert [(e["kind"], e.get("stepId")) for e in events] == [
        ("run_start", None), ("step_start", "triage"), ("prompt", "triage"),
        ("step_end", "triage"), ("step_end", "link"), ("run_end", None)]
    assert [m.content for m in memory.get(done["memoryIds"])] == [
        "The paging outage belongs to the SRE team"]
    assert "March" not in repr(memory.recall("paging outage incident").nodes)
