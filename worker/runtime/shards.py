"""Routing: every orchestrator maps to exactly one shard queue, ``<prefix>.<shard>``.

The shard is a stable hash of the orchestratorId (blake2b, not Python's salted
``hash``), unless settings pin the orchestrator to a shard. Each shard queue is
consumed by one worker process with concurrency 1, so one orchestrator has one
writer and its tasks run in the order they were published.

Control work (beat fan-outs, outbox reconciliation, ingest scans, re-embedding,
integrity checks, gc, backups, dead-letter retries) goes to the shard's control queue,
``<prefix>.<shard>.control``, which the same worker reads first (kombu's ``priority``
queue order): a backlog of write-backs cannot starve it, and there is still one writer
per file. Write-backs, edits and bulletins stay on the data queue, in publish order (a
bulletin must see the writes published before it).
"""

from __future__ import annotations

import hashlib
from typing import Any

from orchmem.config import MemoryValidationError, Settings, check_orchestrator_id
from orchmem.tasks.backups import BACKUP
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.tasks.maintenance import DEADLETTER_RETRY, FANOUT, GC, INTEGRITY, OUTBOX, REEMBED
from orchmem.tasks.read import RECALL_READ

#: Tasks that go to a shard's control queue.
CONTROL_TASKS = frozenset({FANOUT, OUTBOX, INGEST_SCAN, REEMBED, INTEGRITY, GC,
                           DEADLETTER_RETRY, BACKUP})

#: Tasks that go to a shard's read queue, served by ``orchmem reader`` (no writes).
READ_TASKS = frozenset({RECALL_READ})


def shard_for(settings: Settings, orchestrator_id: str) -> int:
    """The shard that owns ``orchestrator_id``."""
    check_orchestrator_id(orchestrator_id)
    pinned = settings.orchestrators.get(orchestrator_id)
    if pinned is not None and pinned.shard is not None:
        return pinned.shard
    digest = hashlib.blake2b(orchestrator_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % settings.shards


def queue_name(settings: Settings, shard: int) -> str:
    return f"{settings.queue_prefix}.{shard}"


def control_queue_name(settings: Settings, shard: int) -> str:
    return f"{settings.queue_prefix}.{shard}.control"


def read_queue_name(settings: Settings, shard: int) -> str:
    return f"{settings.queue_prefix}.{shard}.read"


def read_queues(settings: Settings) -> list[str]:
    return [read_queue_name(settings, shard) for shard in range(settings.shards)]


def shard_queues(settings: Settings, shard: int) -> list[str]:
    """The queues one shard's worker reads, in the order it reads them: control first."""
    return [control_queue_name(settings, shard), queue_name(settings, shard)]


def queue_for(settings: Settings, orchestrator_id: str, task: str | None = None) -> str:
    """The queue of ``orchestrator_id``'s shard that ``task`` goes to (data by default)."""
    shard = shard_for(settings, orchestrator_id)
    if task in READ_TASKS:
        return read_queue_name(settings, shard)
    if task in CONTROL_TASKS:
        return control_queue_name(settings, shard)
    return queue_name(settings, shard)


def all_queues(settings: Settings) -> list[str]:
    return [q for shard in range(settings.shards) for q in shard_queues(settings, shard)]


class ShardRouter:
    """Celery router: a task with ``orchestrator_id`` goes to that orchestrator's queue,
    one with ``shard`` (fan-out jobs) to that shard's queue."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def __call__(self, name: str, args: Any, kwargs: Any, options: Any, task: Any = None,
                 **_: Any) -> dict[str, str] | None:
        kwargs = kwargs or {}
        if "orchestrator_id" in kwargs:
            queue = queue_for(self.settings, kwargs["orchestrator_id"], name)
        elif "shard" in kwargs:
            shard = kwargs["shard"]
            if not isinstance(shard, int) or not 0 <= shard < self.settings.shards:
                last = self.settings.shards - 1
                raise MemoryValidationError(f"shard {shard!r} is not in 0..{last}")
            queue = (control_queue_name(self.settings, shard) if name in CONTROL_TASKS
                     else queue_name(self.settings, shard))
        else:
            return None
        return {"queue": queue, "routing_key": queue}
