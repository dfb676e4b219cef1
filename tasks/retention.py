"""The retention job: forget what ``memory.governance.retention`` says is too old
(models/governance/retention.py), audited per memory, with its counts in memory.log."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from orchmem.models.core.shapes import utc_now
from orchmem.models.execlog.archive import archive_log, check_cut
from orchmem.models.governance.retention import apply_retention
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.tasks.base import MemoryTask
from orchmem.tasks.forget import erase_elsewhere

RETENTION = "orchmem.retention"


@shared_task(base=MemoryTask, bind=True, name=RETENTION, kind="retention", tracked=False)
def retention(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Apply the retention rules now (``payload["dryRun"]``: only count), and archive the
    execution log's old events (``memory.log.archive_after_days``, or
    ``payload["archiveLogBefore"]``: an operator's cut). Returns ``{"ok", "count",
    "soft", "hard", "memoryIds", "byRule", "dryRun", "log"}``."""

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        dry_run = payload.get("dryRun") is True
        cut = check_cut(payload.get("archiveLogBefore"))
        done = apply_retention(odb, utc_now(), key=key, task=self.name, dry_run=dry_run)
        done["log"] = archive_log(odb, utc_now(), cut, dry_run=dry_run)
        if done["log"]["archived"] or done["log"]["keptAuditCritical"]:
            odb.log.write("log_archived", dryRun=dry_run, **done["log"])
        if done["hard"] and not dry_run:
            done["erased"] = erase_elsewhere(self, odb)
        odb.log.write("retention", count=done["count"], soft=done["soft"], hard=done["hard"],
                      byRule=done["byRule"], dryRun=dry_run)
        return {"ok": True, "task": self.name, "orchestratorId": orchestrator_id, **done}

    return self.pipeline(orchestrator_id, payload, body)
