"""The base class of orchmem's tasks: settings, databases, and what a task declares.

A task declares, as options of its decorator
(``@shared_task(base=MemoryTask, bind=True, name=..., kind="wb")``):

- ``kind``: the short name its idempotency keys are derived under;
- ``tracked``: whether it keeps a receipt (every write does; a read-only task such as
  the bulletin does not: running it twice changes nothing);
- ``storage_retries``: how often a transient storage error is retried;
- ``batchable``: a record-writing task whose waiting deliveries a shard worker may
  apply together, in one transaction with all their receipts (:mod:`.batch`);
- ``read_only``: a task that only reads the orchestrator's memory (the bulletin),
  whose waiting deliveries a shard worker may run in one job with a batch;
- ``texts_ahead``: for a batchable task, ``(task, odb, payload) -> texts``, the texts
  its body will embed, so a batch embeds them all in one model call ahead (default:
  ``memories[].content``).

Its body runs under :func:`orchmem.tasks.pipeline.run` (``self.pipeline(...)``), which
does the scope check, the database, the receipt, dead letters, retries and logs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from celery import Task

from orchmem.config import (
    MemoryCorrupt,
    MemoryDegraded,
    MemoryDisabled,
    MemoryNotFound,
    MemoryValidationError,
    ScopeViolation,
    Settings,
)
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.db.integrity import quarantine
from orchmem.models.workspace.memlog import MemoryLog
from orchmem.tasks import pipeline

logger = logging.getLogger(__name__)


class MemoryTask(Task):
    """Base class of orchmem's tasks (``@shared_task(base=MemoryTask, bind=True)``)."""

    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    #: Expected failures: recorded as the task's failure, logged without a traceback.
    throws = (MemoryValidationError, ScopeViolation, MemoryDisabled, MemoryCorrupt,
              MemoryNotFound, MemoryDegraded)
    #: The name its idempotency keys are derived under.
    kind = "task"
    #: Keeps a receipt (exactly-once effect); False for read-only tasks.
    tracked = True
    #: Retries of a transient storage error (locked, full, read-only), with backoff.
    storage_retries = 5
    #: Deliveries waiting together may be applied as one batch (:mod:`.batch`): the
    #: body must be a tracked write whose effects are all in the orchestrator's file.
    batchable = False
    #: Reads the orchestrator's file and writes nothing in it (its own snapshot files
    #: at most): a shard worker may run the waiting ones in one pool job, after the
    #: commit of the writes waiting before them (:mod:`orchmem.worker.runtime.batching`).
    read_only = False

    def said_again(self, odb: OrchestratorDB, result: dict[str, Any]) -> bool:
        """Whether a redelivery of a finished task (its stored ``result``) is new
        evidence, to run again rather than answer as a duplicate: never, by default."""
        return False

    def texts_ahead(self, odb: OrchestratorDB, payload: Any) -> list[str]:
        """The texts a delivery of ``payload`` will embed, for its batch's one model
        call: by default the ones it names outright, ``memories[].content``."""
        memories = payload.get("memories") if isinstance(payload, dict) else None
        if not isinstance(memories, list):
            return []
        return [m["content"] for m in memories if isinstance(m, dict)
                and isinstance(m.get("content"), str) and m["content"].strip()]

    @property
    def settings(self) -> Settings:
        return self.app.settings

    @property
    def databases(self) -> Databases:
        return self.app.databases

    def misrouted(self, orchestrator_id: str) -> tuple[str, str] | None:
        """``(queue it arrived on, its orchestrator's queue)`` when they differ, else None."""
        delivery = self.request.delivery_info or {}
        arrived = delivery.get("routing_key")
        if arrived is None or self.request.is_eager:
            return None
        expected = self.app.queue_of(self.name, {"orchestrator_id": orchestrator_id})
        return None if arrived == expected else (str(arrived), str(expected))

    def resharded(self, orchestrator_id: str, arrived: str) -> bool:
        """Whether a message on the wrong queue was routed right when it was sent, under
        another shard count (its ``orchmemShards`` header): sent before ``shards``
        changed, it is forwarded, not refused."""
        then = self.request.get("orchmemShards")
        if not isinstance(then, int) or isinstance(then, bool) or then < 1 or \
                then == self.settings.shards:
            return False
        queue = self.app.queue_of(self.name, {"orchestrator_id": orchestrator_id}, then)
        return bool(queue == arrived)

    def open_db(self, orchestrator_id: str, *, create: bool = True) -> OrchestratorDB | None:
        """Open the orchestrator's database (None: it has none and ``create`` is False);
        quarantine it if it is damaged."""
        try:
            return self.databases.open(orchestrator_id, create=create)
        except MemoryCorrupt as exc:
            self.disable(orchestrator_id, str(exc))
            raise

    def disable(self, orchestrator_id: str, reason: str) -> Path:
        """Move a damaged memory.db aside and disable that orchestrator's memory (logged).

        Every other orchestrator goes on; ``orchmem check`` reports this one.
        """
        self.databases.evict(orchestrator_id)
        workspace = self.databases.workspace(orchestrator_id)
        folder = quarantine(workspace, reason)
        logger.error("memory of %s disabled: %s (kept in %s)", orchestrator_id, reason, folder)
        MemoryLog(workspace.log_path, orchestrator_id, _log_bytes(self.settings),
                  self.settings.memory_log_backups).write(
            "memory_disabled", reason=reason, quarantine=str(folder))
        return folder

    def pipeline(self, orchestrator_id: Any, payload: Any, body: pipeline.Body, *,
                 absent: pipeline.Absent | None = None) -> dict[str, Any]:
        """Run ``body`` for this delivery under every step of :mod:`.pipeline`.
        ``absent``: a read's answer for an orchestrator with no memory yet (then none
        is created)."""
        return pipeline.run(self, orchestrator_id, payload, body, absent)

    def routing_log(self) -> MemoryLog:
        """``<root>/logs/routing.log``: messages forwarded after a change of ``shards``."""
        return MemoryLog(self.settings.logs_dir / "routing.log", "-",
                         _log_bytes(self.settings), self.settings.memory_log_backups)

    def denials_log(self, claimed: str) -> MemoryLog:
        """``<root>/logs/scope-denials.log``: refused cross-scope tasks, as JSON lines."""
        return denials_log(self.settings, claimed)


def _log_bytes(settings: Settings) -> int:
    return int(settings.memory_log_max_mb * 1024 * 1024)


def denials_log(settings: Settings, claimed: str) -> MemoryLog:
    """``<root>/logs/scope-denials.log``: refused cross-scope tasks, as JSON lines."""
    return MemoryLog(settings.logs_dir / "scope-denials.log", claimed, _log_bytes(settings),
                     settings.memory_log_backups)
