"""The edit task: supersede, retract, link or forget one memory, as an audited write."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from orchmem.models.database import OrchestratorDB
from orchmem.models.edits import EDIT_ADAPTER, apply_edit
from orchmem.models.schema import validate_with

from .base import MemoryTask

EDIT = "orchmem.edit"


@shared_task(base=MemoryTask, bind=True, name=EDIT)
def edit(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Apply the edit in ``payload`` (``{"op": "supersede" | "retract" | "link" | "forget", …}``).

    Returns ``{"ok", "op", "memoryIds", "edgeIds"?, "duplicate"}``.
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        change = validate_with(EDIT_ADAPTER, payload, workspace=odb.workspace,
                               name="edit")
        return apply_edit(odb, change, key=key, task=self.name)

    return self.guarded(orchestrator_id, payload, "edit", body)
