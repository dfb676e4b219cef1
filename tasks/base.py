"""What every orchmem task does around its body: scope, receipts, dead letters, logs.

A task body is a function ``(odb, key) -> result``. :meth:`MemoryTask.guarded` runs it
after these checks, in this order:

1. the orchestratorId is valid and the message came from that orchestrator's queue
   (a task for B on A's queue is a scope violation, refused and logged);
2. the database opens (a damaged one is quarantined and the orchestrator disabled);
3. the delivery is counted in the receipt table; a finished key returns its stored
   result (the duplicate delivery is logged as skipped); a key delivered more than
   ``max_deliveries`` times without finishing is dead-lettered instead of run again.

Expected failures (validation, scope, disabled memory) are raised as our errors, so
Celery records them as the task's failure without a traceback; the receipt keeps them
so a redelivery answers the same.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Task
from celery.exceptions import Retry

from orchmem.config import (
    MemoryCorrupt,
    MemoryDisabled,
    MemoryNotFound,
    MemoryValidationError,
    OrchmemError,
    ScopeViolation,
    Settings,
    StorageError,
    check_orchestrator_id,
)
from orchmem.models.memlog import MemoryLog
from orchmem.models.payloads import key_of
from orchmem.models.storage.database import Databases, OrchestratorDB, quarantine
from orchmem.models.storage.deadletters import dead_letter
from orchmem.models.storage.receipts import (
    RECEIPT_DONE,
    finish_receipt,
    record_delivery,
    reject_task,
    release_delivery,
)

logger = logging.getLogger(__name__)

#: Largest JSON payload a task accepts.
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024

Body = Callable[[OrchestratorDB, str], dict[str, Any]]


class MemoryTask(Task):
    """Base class of orchmem's tasks (``@shared_task(base=MemoryTask, bind=True)``)."""

    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    #: Expected failures: recorded as the task's failure, logged without a traceback.
    throws = (MemoryValidationError, ScopeViolation, MemoryDisabled, MemoryCorrupt,
              MemoryNotFound)

    @property
    def settings(self) -> Settings:
        return self.app.settings

    @property
    def databases(self) -> Databases:
        return self.app.databases

    def check_queue(self, orchestrator_id: str) -> None:
        """Refuse a message that arrived on a queue other than its orchestrator's."""
        delivery = self.request.delivery_info or {}
        arrived = delivery.get("routing_key")
        if arrived is None or self.request.is_eager:
            return
        route = self.app.amqp.router.route({}, self.name, (), {"orchestrator_id": orchestrator_id})
        expected = route["queue"].name
        if arrived != expected:
            raise ScopeViolation(
                f"task {self.name} for orchestrator {orchestrator_id!r} arrived on queue "
                f"{arrived!r}, but that orchestrator's queue is {expected!r}; refused"
            )

    def open_db(self, orchestrator_id: str) -> OrchestratorDB:
        """Open the orchestrator's database; quarantine it if it is damaged."""
        try:
            odb = self.databases.open(orchestrator_id)
        except MemoryCorrupt as exc:
            self.disable(orchestrator_id, str(exc))
            raise
        assert odb is not None  # create=True
        return odb

    def disable(self, orchestrator_id: str, reason: str) -> Path:
        """Move a damaged memory.db aside and disable that orchestrator's memory (logged).

        Every other orchestrator goes on; ``orchmem check`` reports this one.
        """
        self.databases.forget(orchestrator_id)
        workspace = self.databases.workspace(orchestrator_id)
        folder = quarantine(workspace, reason)
        logger.error("memory of %s disabled: %s (kept in %s)", orchestrator_id, reason, folder)
        MemoryLog(workspace.log_path, orchestrator_id, _log_bytes(self.settings),
                  self.settings.memory_log_backups).write(
            "memory_disabled", reason=reason, quarantine=str(folder))
        return folder

    def guarded(self, orchestrator_id: Any, payload: Any, kind: str, body: Body,
                track: bool = True) -> dict[str, Any]:
        """Run ``body`` under the checks of this module; see the module docstring.

        ``track=False`` is for read-only tasks (the bulletin): no receipt, no delivery
        count, since running one twice changes nothing.
        """
        started = time.monotonic()
        outcome = "error"
        odb: OrchestratorDB | None = None
        key = ""
        try:
            check_orchestrator_id(orchestrator_id)
            try:
                self.check_queue(orchestrator_id)
            except ScopeViolation as exc:
                # Not written into the named orchestrator's folder: this worker is not its
                # writer, and on another host that folder may not even exist here.
                denials_log(self.settings, orchestrator_id).write(
                    "scope_denied", task=self.name, reason=str(exc), taskId=self.request.id)
                raise
            odb = self.open_db(orchestrator_id)
            _check_size(payload)
            key = key_of(orchestrator_id, kind, payload)
            if not track:
                result = body(odb, key)
                outcome = "ok"
                return result
            delivery = record_delivery(odb, key, self.name)
            if delivery.finished and delivery.result is not None:
                outcome = "duplicate"
                odb.log.write("duplicate_delivery_skipped", task=self.name, key=key,
                              deliveries=delivery.deliveries, taskId=self.request.id)
                return {**delivery.result, "duplicate": True}
            max_deliveries = self.settings.worker.max_deliveries
            if delivery.deliveries > max_deliveries:
                outcome = "dead_letter"
                error = (f"delivered {delivery.deliveries} times without finishing "
                         f"(max {max_deliveries}): the task crashed its worker each time")
                dead_letter(odb, key, self.name,
                            {"orchestrator_id": orchestrator_id, "payload": payload},
                            delivery.deliveries, error)
                odb.log.write("dead_lettered", task=self.name, key=key,
                              deliveries=delivery.deliveries, taskId=self.request.id)
                return {"ok": False, "task": self.name, "idempotencyKey": key,
                        "error": {"error": "dead_letter", "message": error}}
            try:
                result = body(odb, key)
            except MemoryValidationError as exc:
                outcome = "rejected"
                reject_task(odb, key, {"ok": False, "task": self.name, "idempotencyKey": key,
                                       "error": exc.to_dict()})
                raise
            outcome = "ok"
            return result
        except Retry:
            # A deliberate retry (e.g. an edit waiting for its memory): not a crash.
            outcome = "retry"
            if odb is not None:
                release_delivery(odb, key)
            raise
        except StorageError as exc:
            # Transient (locked, disk full, read-only): not a crash, so the delivery is
            # not counted toward dead-lettering; retried with backoff.
            outcome = "retry"
            if odb is not None:
                release_delivery(odb, key)
                odb.log.write("task_retry", task=self.name, error=exc.code,
                              message=str(exc)[:500], taskId=self.request.id)
            # Reopen next time: SQLite keeps a file it opened read-only that way, even
            # once the folder is writable again.
            if isinstance(orchestrator_id, str):
                self.databases.forget(orchestrator_id)
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries),
                             max_retries=5) from exc
        except OrchmemError as exc:
            if outcome == "error":
                outcome = exc.code
            if odb is not None:
                odb.log.write("task_failed", task=self.name, error=exc.code,
                              message=str(exc)[:500], taskId=self.request.id)
            elif not isinstance(exc, ScopeViolation):
                logger.warning("task %s refused: %s", self.name, exc)
            raise
        finally:
            elapsed_ms = round((time.monotonic() - started) * 1000, 2)
            logger.info("task=%s orchestrator=%s outcome=%s duration_ms=%s id=%s", self.name,
                        orchestrator_id if isinstance(orchestrator_id, str) else "?",
                        outcome, elapsed_ms, self.request.id)
            if odb is not None:
                odb.log.write("task", task=self.name, outcome=outcome, durationMs=elapsed_ms,
                              taskId=self.request.id)


def _check_size(payload: Any) -> None:
    try:
        size = len(json.dumps(payload, ensure_ascii=False).encode())
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(f"payload is not plain JSON: {exc}") from None
    if size > MAX_PAYLOAD_BYTES:
        raise MemoryValidationError(
            f"payload has {size} bytes; the limit is {MAX_PAYLOAD_BYTES}",
            [{"path": "payload", "message": "too large"}])



def complete(odb: OrchestratorDB, key: str, result: dict[str, Any]) -> dict[str, Any]:
    """Store the result of a task whose body did not commit its own receipt."""
    with odb.write():
        finish_receipt(key, RECEIPT_DONE, result)
    return result


def _log_bytes(settings: Settings) -> int:
    return int(settings.memory_log_max_mb * 1024 * 1024)


def denials_log(settings: Settings, claimed: str) -> MemoryLog:
    """``<root>/logs/scope-denials.log``: refused cross-scope tasks, as JSON lines."""
    return MemoryLog(settings.logs_dir / "scope-denials.log", claimed, _log_bytes(settings),
                     settings.memory_log_backups)
