"""Retention of the execution log through the real worker: old events of finished runs
move to a JSONL archive (0600, listed), audit-critical ones stay in the log unless the
policy names them, the runs stay listed, a hard forget reaches the archive, and a bad
cut is refused naming its field with nothing archived."""

from __future__ import annotations

import json
import stat
from typing import Any

import pytest
from click.testing import CliRunner
from orchmem_testing import settings_env

from orchmem.config import Settings
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.execlog.archive import archive_log, archives, folder_of
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.execlog.entries import read_log, run_of
from orchmem.worker import MemoryClient
from orchmem.worker.cli.main import main

pytestmark = pytest.mark.usefixtures("worker")
TIMEOUT = 60
SECRET = "The staging database password rotates every Tuesday"


def cli(settings: Settings, *args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(main, [*args, "--json"], env=settings_env(settings),
                                prog_name="orchmem")
    assert (result.exit_code == 0) == ok, result.output
    return json.loads(result.output) if ok else result.output


def _run(memory: MemoryClient) -> tuple[str, str]:
    with memory.run("rotate credentials") as run:
        with run.step("plan") as step:
            step.prompt(f"Note this: {SECRET}.")
            step.tool_call("vault_write", data={"path": "db/staging"})
            written = step.write_back(memories=[{"type": "Fact", "content": SECRET}])
        run.checkpoint("s3://state/rotate.json", schema_version=1)
        run.outcome("done", "Rotated.")
    results = run.wait(TIMEOUT)
    assert all(r and r["ok"] for r in results), results
    value = written.wait(TIMEOUT)
    assert value is not None and value["ok"]
    return run.run_id, value["memoryIds"][0]


def _events(settings: Settings, orch_id: str, run_id: str) -> list[dict[str, Any]]:
    odb = Databases(settings, readonly=True).open(orch_id, create=False)
    assert odb is not None
    return list(read_log(odb, run_id=run_id, limit=1000)[0])


def test_old_events_are_archived_audit_critical_ones_stay_and_forget_reaches_them(
        settings: Settings, app: Any, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    run_id, memory_id = _run(memory)
    before = _events(settings, orch_id, run_id)

    bad = cli(settings, "retention", "--orch", orch_id, "--archive-log-before", "Tuesday",
              ok=False)
    assert "archiveLogBefore" in bad and _events(settings, orch_id, run_id) == before

    done = cli(settings, "retention", "--orch", orch_id, "--archive-log-before",
               format_ts(utc_now()))["log"]
    kept = _events(settings, orch_id, run_id)
    assert sorted(e["kind"] for e in kept) == ["checkpoint", "tool_call"]
    assert done["archived"] == len(before) - 2 and done["keptAuditCritical"] >= 2
    [listed] = cli(settings, "log", "--orch", orch_id, "--archived")["archives"]
    assert (listed["events"], listed["policy"]["auditCritical"]) == (len(before) - 2, False)
    odb = Databases(settings, readonly=True).open(orch_id, create=False)
    assert odb is not None
    path = folder_of(odb) / listed["file"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert {e["seq"] for e in lines} | {e["seq"] for e in kept} == {e["seq"] for e in before}
    assert any(SECRET in e.get("text", "") for e in lines)
    run = run_of(odb, run_id)
    assert run is not None and run["events"] == len(before)  # the run is still listed

    forgot = memory.forget(memory_id, hard=True).wait(TIMEOUT)
    assert forgot is not None and forgot["ok"], forgot
    text = path.read_text()
    assert SECRET not in text and "staging database" not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert all(e.get("redacted") == "forget_hard" for e in
               (json.loads(line) for line in text.splitlines()[1:]) if e["kind"] == "prompt")


def test_the_explicit_policy_archives_audit_critical_events_too(
        settings: Settings, app: Any, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    run_id, _ = _run(memory)
    ours = settings.model_copy(deep=True)
    ours.memory.log.archive_audit_critical = True
    odb = Databases(ours).open(orch_id, create=False)
    assert odb is not None
    counted = archive_log(odb, utc_now(), utc_now(), dry_run=True)
    assert counted["archived"] == len(_events(settings, orch_id, run_id))
    assert _events(settings, orch_id, run_id) and archives(odb) == []
    done = archive_log(odb, utc_now(), utc_now())
    assert _events(settings, orch_id, run_id) == [] and done["auditCritical"] is True
    [listed] = archives(odb)
    assert listed["policy"]["auditCritical"] is True and listed["events"] == done["archived"]


def test_a_hard_forget_by_run_erases_that_runs_archived_texts(
        settings: Settings, app: Any, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    run_id, _ = _run(memory)
    done = cli(settings, "retention", "--orch", orch_id, "--archive-log-before",
               format_ts(utc_now()))["log"]
    assert done["archived"] > 0
    odb = Databases(settings, readonly=True).open(orch_id, create=False)
    assert odb is not None
    [listed] = archives(odb)
    path = folder_of(odb) / listed["file"]
    assert "Rotated." in path.read_text()
    forgot = memory.forget_where(workflow_run_id=run_id, hard=True).wait(TIMEOUT)
    assert forgot is not None and forgot["ok"], forgot
    assert forgot["erased"]["archivedEvents"] >= 2
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert all("text" not in r and "data" not in r for r in rows)
    assert "Rotated." not in path.read_text() and SECRET not in path.read_text()
