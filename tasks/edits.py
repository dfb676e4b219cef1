"""The edit task: supersede, retract, link or forget one memory, as an audited write."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from orchmem.config import MemoryNotFound
from orchmem.models.edits import EDIT_ADAPTER, apply_edit, erases, undone
from orchmem.models.schema import validate_with
from orchmem.models.storage.database import OrchestratorDB

from .base import MemoryTask
from .forget import erase_elsewhere

EDIT = "orchmem.edit"
RETRY_EVERY_S = 2


def edit_said_again(task: MemoryTask, odb: OrchestratorDB, result: dict[str, Any]) -> bool:
    """An edit delivered again after its memory went back (or after it was refused) is
    a new request: it runs again rather than answer the first one's receipt."""
    with odb.read():
        return undone(result)


@shared_task(base=MemoryTask, bind=True, name=EDIT, kind="edit", said_again=edit_said_again)
def edit(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Apply the edit in ``payload`` (``{"op": "supersede" | "retract" | "link" | "forget", …}``).

    Returns ``{"ok", "op", "memoryIds", "edgeIds"?, "duplicate"}``; a hard forget adds
    ``"erased"``: one key per step of the registry of what is derived from memories
    that reports (:mod:`orchmem.models.derived`; the broker's and the bulletin's in
    :mod:`.forget`).
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        change = validate_with(EDIT_ADAPTER, payload, workspace=odb.workspace,
                               name="edit")
        try:
            result = apply_edit(odb, change, key=key, task=self.name)
        except MemoryNotFound as exc:
            # Its write-back may still be in flight (redelivered after a crash, say):
            # wait for it rather than apply effects out of order.
            limit = change.wait_for_memory_s
            if limit is None:
                limit = self.settings.worker.edit_wait_s
            if self.request.retries * RETRY_EVERY_S < limit:
                odb.log.write("edit_waiting", key=key, reason=str(exc)[:300],
                              attempt=self.request.retries + 1)
                raise self.retry(countdown=RETRY_EVERY_S, max_retries=None) from exc
            raise
        if erases(change):
            # Also on a redelivery: the first delivery may have died before this ran.
            result["erased"] = {**result.get("erased", {}), **erase_elsewhere(self, odb)}
        return result

    return self.pipeline(orchestrator_id, payload, body)
