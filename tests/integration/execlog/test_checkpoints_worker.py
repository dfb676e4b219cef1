"""Checkpoints through the real worker: restore checks the state's schema version, a run
branched from a checkpoint records its parent, two checkpoints diff, and ``orchmem log``
shows the tail of the log and a run's tree of spans; bad input names its field and
changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from orchmem_testing import settings_env, unique_id

from orchmem.config import MemoryNotFound, MemoryValidationError, ScopeViolation, Settings
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.execlog.entries import read_log
from orchmem.worker import MemoryClient
from orchmem.worker.cli.main import main

pytestmark = pytest.mark.usefixtures("worker")
TIMEOUT = 60


def _log(settings: Settings, orch_id: str, run_id: str | None = None) -> list[dict[str, Any]]:
    odb = Databases(settings, readonly=True).open(orch_id, create=False)
    assert odb is not None
    return list(read_log(odb, run_id=run_id, limit=1000)[0])


def cli(settings: Settings, *args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(main, [*args, "--json"], env=settings_env(settings),
                                prog_name="orchmem")
    assert (result.exit_code == 0) == ok, result.output
    return json.loads(result.output) if ok else result.output


def _run_with_checkpoints(memory: MemoryClient) -> tuple[str, str, str]:
    with memory.run("migrate") as run:
        with run.step("plan") as step:
            step.prompt("Plan the migration of the billing tables.")
            step.tool_call("read_schema", data={"db": "billing"})
        first = run.checkpoint("s3://state/plan.json", schema_version=1, step_id="plan")
        second = run.checkpoint("s3://state/apply.json", schema_version=1)
    assert all(r and r["ok"] for r in run.wait(TIMEOUT))
    return run.run_id, first, second


def test_restore_branch_and_diff_checkpoints(settings: Settings, app: Any,
                                             orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    run_id, first, second = _run_with_checkpoints(memory)
    restored = memory.restore(second)
    assert (restored["ref"], restored["schemaVersion"], restored["runId"],
            restored["parentCheckpointId"]) == ("s3://state/apply.json", 1, run_id, first)

    with memory.run("migrate, second try", from_checkpoint=first) as branch:
        third = branch.checkpoint("s3://state/retry.json", schema_version=1)
    branch.wait(TIMEOUT)
    [start] = [e for e in _log(settings, orch_id, branch.run_id) if e["kind"] == "run_start"]
    assert start["data"]["branchOf"] == {"runId": run_id, "checkpointId": first}
    assert memory.restore(third)["parentCheckpointId"] == first

    diff = memory.checkpoint_diff(second, third)
    assert diff["changed"]["ref"] == ["s3://state/apply.json", "s3://state/retry.json"]
    assert diff["changed"]["runId"] == [run_id, branch.run_id]
    assert diff["commonAncestor"] == first and diff["sameRun"] is False
    assert cli(settings, "checkpoint", "diff", "--orch", orch_id, second, third)[
        "commonAncestor"] == first
    assert cli(settings, "checkpoint", "show", "--orch", orch_id, third)["ref"] == \
        "s3://state/retry.json"


def test_a_checkpoint_that_cannot_be_restored_is_refused_naming_the_field(
        settings: Settings, app: Any, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    _, first, _ = _run_with_checkpoints(memory)
    # this client restores only state schema 2: version 1 is incompatible here
    newer = settings.model_copy(deep=True)
    newer.memory.log.checkpoint_schema_versions = [2]
    strict = MemoryClient(orch_id, newer, app=app)
    before = _log(settings, orch_id)
    with pytest.raises(MemoryValidationError) as caught:
        strict.restore(first)
    assert caught.value.errors[0]["path"] == "checkpointId.schemaVersion"
    with pytest.raises(MemoryValidationError) as caught:
        strict.run("branch", from_checkpoint=first)
    assert caught.value.errors[0]["path"] == "from_checkpoint.schemaVersion"

    other = MemoryClient(unique_id("other-orch"), settings, app=app)
    with pytest.raises(ScopeViolation, match="from_checkpoint"):
        other.run("branch", from_checkpoint=first)
    with pytest.raises(MemoryValidationError) as caught:
        memory.run("branch", from_checkpoint=before[0]["eventId"])  # a run_start
    assert caught.value.errors[0]["path"] == "from_checkpoint"
    with pytest.raises(MemoryNotFound):
        memory.restore(f"{first[:11]}{'0' * 16}")  # well formed, never logged
    assert _log(settings, orch_id) == before  # nothing was logged
    log = memory.databases.workspace(orch_id).log_path.read_text()
    assert '"checkpoint_refused"' in log and "from_checkpoint" in log
    output = cli(settings, "checkpoint", "show", "--orch", orch_id, before[0]["eventId"],
                 ok=False)
    assert "CHECKPOINT_ID" in output and "not a checkpoint" in output


def test_the_tail_of_the_log_and_a_runs_tree(settings: Settings, app: Any,
                                             orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    run_id, _, _ = _run_with_checkpoints(memory)
    events = _log(settings, orch_id, run_id)
    tail = cli(settings, "log", "--orch", orch_id, "--tail", "3")["events"]
    assert [e["seq"] for e in tail] == [e["seq"] for e in events[-3:]]
    tree = cli(settings, "log", "--orch", orch_id, "--run", run_id, "--tree")["tree"]
    assert [n["kind"] for n in tree] == ["run_start", "step_start", "checkpoint",
                                         "checkpoint", "run_end"]
    assert [c["kind"] for c in tree[1]["children"]] == ["prompt", "tool_call", "step_end"]
    assert "--run" in cli(settings, "log", "--orch", orch_id, "--tree", ok=False)
