"""What runs around every task body, as small steps (dramatiq's middleware is the model).

A body is a function ``(odb, key) -> result``. :func:`run` calls these steps in order:

1. :func:`check_scope`: the orchestratorId is valid and the message came from that
   orchestrator's queue (a task for B on A's queue is refused and logged to the root's
   scope-denials log, never into B's folder);
2. :func:`open_database`: a damaged database is quarantined and the orchestrator's
   memory disabled; every other orchestrator goes on;
3. :func:`check_size`: a payload over ``MAX_PAYLOAD_BYTES`` is refused;
4. :func:`with_receipt` (tasks declared ``tracked``): the delivery is counted; a
   finished key returns its stored result; a key delivered more than
   ``max_deliveries`` times without finishing is dead-lettered; a validation error or
   a memory that does not exist rejects the key for good; a receipt the body left open
   is completed with its result, so no task can leave a ``started`` receipt behind;
5. :func:`retry_policy`: a deliberate retry or a transient storage error takes the
   delivery's count back; storage errors are retried with the task's declared
   ``storage_retries`` and exponential backoff (capped at 60 s);
6. :func:`observed`: one log line and one ``memory.log`` event per run, with its
   outcome and duration.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from celery.exceptions import Ignore, Retry

from orchmem.config import (
    MemoryNotFound,
    MemoryValidationError,
    OrchmemError,
    ScopeViolation,
    StorageError,
    check_orchestrator_id,
)
from orchmem.models.core.payloads import key_of
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery import deadletters, receipts
from orchmem.models.telemetry import meters, names, spans
from orchmem.tasks.publish import send

if TYPE_CHECKING:
    from orchmem.tasks.base import MemoryTask

logger = logging.getLogger(__name__)

#: Largest JSON payload a task accepts.
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024

Body = Callable[[OrchestratorDB, str], dict[str, Any]]
#: A read's answer for an orchestrator that has no memory yet.
Absent = Callable[[], dict[str, Any]]


@dataclass
class TaskRun:
    """One delivery of one task, as the steps see it."""

    task: MemoryTask
    orchestrator_id: Any
    payload: Any
    odb: OrchestratorDB | None = None
    key: str = ""
    outcome: str = "error"
    #: Memories the body created (for the metrics).
    created: int = 0
    started: float = field(default_factory=time.monotonic)

    def log(self, event: str, **fields: Any) -> None:
        if self.odb is not None:
            self.odb.log.write(event, task=self.task.name, taskId=self.task.request.id,
                               **fields)


def run(task: MemoryTask, orchestrator_id: Any, payload: Any, body: Body,
        absent: Absent | None = None) -> dict[str, Any]:
    """Run ``body`` for one delivery under every step of this module. With ``absent``
    (a read), an orchestrator that has no memory yet is not created: ``absent()`` is
    the answer."""
    current = TaskRun(task, orchestrator_id, payload)
    with observed(current), retry_policy(current):
        check_scope(current)
        open_database(current, create=absent is None)
        if current.odb is None and absent is not None:
            current.outcome = "absent"
            return absent()
        check_size(current.payload)
        current.key = key_of(current.orchestrator_id, task.kind, current.payload)
        return with_receipt(current, body) if task.tracked else _call(current, body)
    raise AssertionError("unreachable: the steps above return or raise")  # pragma: no cover


def check_scope(current: TaskRun) -> None:
    """Refuse (and log) a message on another orchestrator's queue; forward one that was
    routed under an earlier shard count to its queue now (then this delivery ends)."""
    task, orchestrator_id = current.task, current.orchestrator_id
    check_orchestrator_id(orchestrator_id)
    wrong = task.misrouted(orchestrator_id)
    if wrong is None:
        return
    arrived, expected = wrong
    if task.resharded(orchestrator_id, arrived):
        forward(current, arrived, expected)
    exc = ScopeViolation(
        f"task {task.name} for orchestrator {orchestrator_id!r} arrived on queue "
        f"{arrived!r}, but that orchestrator's queue is {expected!r}; refused")
    # Not written into the named orchestrator's folder: this worker is not its writer,
    # and on another host that folder may not even exist here.
    task.denials_log(orchestrator_id).write("scope_denied", task=task.name, reason=str(exc),
                                            taskId=task.request.id)
    raise exc


def forward(current: TaskRun, arrived: str, expected: str) -> None:
    """Send this message on to ``expected`` under the same task id, and end this
    delivery without a result (``Ignore``): the forwarded one answers."""
    task = current.task
    current.outcome = "forwarded"
    send(task.app, task.name, {"orchestrator_id": current.orchestrator_id,
                               "payload": current.payload}, task_id=task.request.id)
    task.routing_log().write("forwarded", task=task.name, orchestratorId=current.orchestrator_id,
                             taskId=task.request.id, fromQueue=arrived, toQueue=expected)
    raise Ignore()


def open_database(current: TaskRun, *, create: bool = True) -> None:
    current.odb = current.task.open_db(current.orchestrator_id, create=create)


def check_size(payload: Any) -> None:
    try:
        size = len(json.dumps(payload, ensure_ascii=False).encode())
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(f"payload is not plain JSON: {exc}") from None
    if size > MAX_PAYLOAD_BYTES:
        raise MemoryValidationError(
            f"payload has {size} bytes; the limit is {MAX_PAYLOAD_BYTES}",
            [{"path": "payload", "message": "too large"}])


def _call(current: TaskRun, body: Body) -> dict[str, Any]:
    assert current.odb is not None
    result = body(current.odb, current.key)
    current.outcome = "ok"
    created = result.get("created") if isinstance(result, dict) else None
    current.created = len(created) if isinstance(created, list) else 0
    return result


def with_receipt(current: TaskRun, body: Body) -> dict[str, Any]:
    odb, key, task = current.odb, current.key, current.task
    assert odb is not None
    # A batch counted this delivery already, in one commit for all its tasks (batch.py).
    delivery = receipts.begin(odb, key, task.name, count=not in_batch(task, "orchmemCounted"))
    if delivery.finished and delivery.result is not None and \
            not task.said_again(odb, delivery.result):
        current.outcome = "duplicate"
        current.log("duplicate_delivery_skipped", key=key, deliveries=delivery.deliveries)
        return {**delivery.result, "duplicate": True}
    limit = task.settings.worker.max_deliveries
    if delivery.deliveries > limit:
        return _dead_letter(current, delivery.deliveries, limit)
    try:
        result = _call(current, body)
    except (MemoryValidationError, MemoryNotFound) as exc:
        # The same payload would be refused again: final, so that no client waits for
        # it and the outbox's reconciler does not send it again.
        if isinstance(exc, MemoryValidationError):
            current.outcome = "rejected"
        receipts.reject(odb, key, {"ok": False, "task": task.name, "idempotencyKey": key,
                                   "error": exc.to_dict()})
        raise
    receipts.complete(odb, key, result)
    return result


def _dead_letter(current: TaskRun, deliveries: int, limit: int) -> dict[str, Any]:
    assert current.odb is not None
    current.outcome = "dead_letter"
    error = (f"delivered {deliveries} times without finishing (max {limit}): "
             "the task crashed its worker each time")
    deadletters.dead_letter(current.odb, current.key, current.task.name,
                            {"orchestrator_id": current.orchestrator_id,
                             "payload": current.payload}, deliveries, error)
    current.log("dead_lettered", key=current.key, deliveries=deliveries)
    return {"ok": False, "task": current.task.name, "idempotencyKey": current.key,
            "error": {"error": "dead_letter", "message": error}}


@contextmanager
def retry_policy(current: TaskRun) -> Iterator[None]:
    task = current.task
    try:
        yield
    except Retry:
        # A deliberate retry (e.g. an edit waiting for its memory): not a crash.
        current.outcome = "retry"
        _release(current)
        raise
    except StorageError as exc:
        if in_batch(task, "orchmemBatch"):
            # Inside a batch's transaction: the batch is rolled back and its tasks run
            # one by one, where this error is retried as below (batch.py).
            current.outcome = "batch_rolled_back"
            raise
        raise _retry_storage(current, exc) from exc
    except OrchmemError as exc:
        if current.outcome == "error":
            current.outcome = exc.code
        if current.odb is not None:
            current.log("task_failed", error=exc.code, message=str(exc)[:500])
        elif not isinstance(exc, ScopeViolation):
            logger.warning("task %s refused: %s", task.name, exc)
        raise


def in_batch(task: MemoryTask, flag: str) -> bool:
    """Whether this delivery runs inside a batch (``orchmemBatch``: in the batch's
    transaction; ``orchmemCounted``: its delivery was counted by the batch)."""
    return bool(task.request.get(flag))


def _retry_storage(current: TaskRun, exc: StorageError) -> Retry:
    """Transient (locked, disk full, read-only): not a crash, so the delivery is not
    counted toward dead-lettering; retried with backoff."""
    task = current.task
    current.outcome = "retry"
    _release(current)
    current.log("task_retry", error=exc.code, message=str(exc)[:500])
    # Reopen next time: SQLite keeps a file it opened read-only that way, even once
    # the folder is writable again.
    if isinstance(current.orchestrator_id, str):
        task.databases.evict(current.orchestrator_id)
    return task.retry(exc=exc, countdown=min(60, 2 ** task.request.retries),
                      max_retries=task.storage_retries)


def _release(current: TaskRun) -> None:
    if current.odb is not None and current.key and current.task.tracked:
        receipts.release(current.odb, current.key)


@contextmanager
def observed(current: TaskRun) -> Iterator[None]:
    """One log line, one ``memory.log`` event, one span and the metrics of this run. The
    span continues the sender's trace (the ``traceparent`` header of its message)."""
    task = current.task
    orchestrator = current.orchestrator_id if isinstance(current.orchestrator_id, str) \
        else "?"
    with spans.span(names.task_span(names.SPAN_PROCESS, task.name), {
            names.MESSAGING_SYSTEM: names.MESSAGING_SYSTEM_VALUE,
            names.MESSAGING_OPERATION: "process", names.TASK: task.name,
            names.MESSAGING_MESSAGE_ID: str(task.request.id or ""),
            names.ORCHESTRATOR: orchestrator}, kind="consumer",
            parent=spans.context_of(task.request)) as traced:
        try:
            yield
        finally:
            elapsed_s = time.monotonic() - current.started
            elapsed_ms = round(elapsed_s * 1000, 2)
            logger.info("task=%s orchestrator=%s outcome=%s duration_ms=%s id=%s",
                        task.name, orchestrator, current.outcome, elapsed_ms, task.request.id)
            current.log("task", outcome=current.outcome, durationMs=elapsed_ms)
            traced.set(names.OUTCOME, current.outcome)
            meters.task_done(task.name, current.outcome, elapsed_s, current.created,
                             _queue_wait_s(task))


def _queue_wait_s(task: MemoryTask) -> float | None:
    """How long the delivery's message waited since it was sent (None: not sent)."""
    sent = task.request.get("orchmemSentAt")
    if not isinstance(sent, int) or isinstance(sent, bool) or task.request.is_eager:
        return None
    return (time.time_ns() - sent) / 1e9
