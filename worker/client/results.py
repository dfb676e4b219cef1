"""How a client reads a write's outcome, for its
:class:`~orchmem.worker.client.handles.WriteHandle`: the receipt in SQLite (``done``),
the task's result waited for (``wait``) or read without waiting (``result_now``, after
``poll_only``; see :mod:`orchmem.worker.client.write_wait`).

:class:`ResultReader` belongs to one :class:`~orchmem.worker.client.memory_client.MemoryClient`
and uses its ``databases``, ``orchestrator_id``, ``immediate``, ``app`` and ``_warn``.
Celery's Redis result store pushes a task's result to every process
subscribed to its channel (Celery subscribes at publish) and reads those pushes only
while a ``get`` blocks: a write whose result is polled unsubscribes at once and reads
the replies already pushed, so that nothing piles up unread on the connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchmem.config import OrchmemError
from orchmem.models.storage.delivery import receipts
from orchmem.worker.client.handles import WriteHandle, task_result

if TYPE_CHECKING:
    from orchmem.worker.client.memory_client import MemoryClient

#: The bound of a result read once the result store says it is there (a read, not a wait).
RESULT_READ_S = 5.0
#: Replies of the result store's channel read after each polled write's publish: more
#: than the two each brings (its channel's subscribe and unsubscribe), so none pile up.
REPLIES_READ = 4


class ResultReader:
    """The outcome reads of one client's writes."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client

    def receipt_final(self, key: str) -> bool:
        """Whether ``key``'s receipt is final; False when it cannot be read (logged)."""
        client = self.client
        try:
            odb = client.databases.open(client.orchestrator_id, create=False)
            return odb is not None and receipts.is_final(odb, key)
        except OrchmemError as exc:
            client._warn("receipt not read", exc)
            return False

    def result(self, handle: WriteHandle, timeout: float) -> dict[str, Any] | None:
        from celery.exceptions import TimeoutError as CeleryTimeout

        try:
            client = self.client
            pending = handle._async if client.immediate else client.app.AsyncResult(handle.task_id)
            value = pending.get(timeout=timeout, propagate=False)
        except CeleryTimeout:
            return None
        except Exception as exc:
            self.client._warn("waiting for a result", exc)
            return None
        return task_result(value)

    def poll_only(self, handle: WriteHandle) -> None:
        if self.client.immediate or handle._async is None:
            return
        backend = handle._async.backend
        consumer = getattr(backend, "result_consumer", None)
        if consumer is None:
            return
        try:
            backend.remove_pending_result(handle._async)  # unsubscribes its channel
            for _ in range(REPLIES_READ):  # each reads one reply if there is one
                consumer.drain_events(timeout=0)
        except Exception as exc:
            self.client._warn("result channel not read", exc)

    def result_now(self, handle: WriteHandle) -> tuple[bool, dict[str, Any] | None]:
        # One AsyncResult: ready() caches a final state, so get() answers from the cache
        # without subscribing to the result store's channel again.
        try:
            client = self.client
            pending = handle._async if client.immediate else client.app.AsyncResult(handle.task_id)
            if not pending.ready():
                return False, None
            return True, task_result(pending.get(timeout=RESULT_READ_S, propagate=False))
        except Exception as exc:
            self.client._warn("waiting for a result", exc)
            return True, None
