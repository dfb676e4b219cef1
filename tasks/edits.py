"""The edit task: supersede, retract, link or forget one memory, as an audited write."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from orchmem.config import MemoryNotFound
from orchmem.models.core.shapes import validate_with
from orchmem.models.governance.edits import EDIT_ADAPTER, apply_edit, erases, undone
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery.outbox import writes_in_flight
from orchmem.tasks.base import MemoryTask
from orchmem.tasks.forget import erase_elsewhere
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.tasks.writeback import WRITEBACK

EDIT = "orchmem.edit"
RETRY_EVERY_S = 2
#: The tasks whose writes may create the memory an edit names.
CREATING = (WRITEBACK, INGEST_SCAN)


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
    that reports (:mod:`orchmem.models.governance.derived`; the broker's and the bulletin's in
    :mod:`.forget`).
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        change = validate_with(EDIT_ADAPTER, payload, workspace=odb.workspace,
                               name="edit")
        try:
            result = apply_edit(odb, change, key=key, task=self.name)
        except MemoryNotFound as exc:
            wait_for_memory(self, odb, key, change.wait_for_memory_s, exc)
            raise
        if erases(change):
            # Also on a redelivery: the first delivery may have died before this ran.
            result["erased"] = {**result.get("erased", {}), **erase_elsewhere(self, odb)}
        return result

    return self.pipeline(orchestrator_id, payload, body)


def wait_for_memory(task: MemoryTask, odb: OrchestratorDB, key: str,
                    asked_s: int | None, exc: MemoryNotFound) -> None:
    """Retry later (raises Retry) while a write that may create the missing memory is
    still in flight (its write-back redelivered after a crash, or lost on its way and
    kept in the outbox), for at most ``asked_s`` (default ``worker.edit_wait_s``) in
    all; return when none is, so the edit ends ``not_found`` at once."""
    limit = task.settings.worker.edit_wait_s if asked_s is None else asked_s
    retries = task.request.retries
    if retries * RETRY_EVERY_S >= limit or not writes_in_flight(
            odb, CREATING, besides=key, within_s=limit):
        return
    odb.log.write("edit_waiting", key=key, reason=str(exc)[:300], attempt=retries + 1)
    raise task.retry(countdown=RETRY_EVERY_S, max_retries=retries + 1) from exc
