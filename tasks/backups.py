"""The scheduled backup: beat's ``backup`` job publishes it per orchestrator, on the
shard's control queue, every ``backup.interval_s``."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from orchmem.models.storage.db.backup import prune, take_backup
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.tasks.base import MemoryTask

BACKUP = "orchmem.backup"


@shared_task(base=MemoryTask, bind=True, name=BACKUP, kind="backup", tracked=False)
def backup(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Back the memory up into ``memory/backups/`` (online backup API) and keep the newest
    ``backup.retention_count``. Returns ``{"ok", "backup", "removed"}``."""

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        path = take_backup(odb, "scheduled")
        removed = prune(odb.workspace, self.settings.backup.retention_count)
        return {"ok": True, "task": self.name, "orchestratorId": orchestrator_id,
                "backup": str(path), "removed": [str(p) for p in removed]}

    return self.pipeline(orchestrator_id, payload, body)
