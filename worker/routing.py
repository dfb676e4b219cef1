"""Routing: every orchestrator maps to exactly one shard queue, ``<prefix>.<shard>``.

The shard is a stable hash of the orchestratorId (blake2b, not Python's salted
``hash``), unless settings pin the orchestrator to a shard. Each shard queue is
consumed by one worker process with concurrency 1, so one orchestrator has one
writer and its tasks run in the order they were published.
"""

from __future__ import annotations

import hashlib
from typing import Any

from orchmem.config import MemoryValidationError, Settings, check_orchestrator_id


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


def queue_for(settings: Settings, orchestrator_id: str) -> str:
    """The queue name of ``orchestrator_id``'s shard."""
    return queue_name(settings, shard_for(settings, orchestrator_id))


def all_queues(settings: Settings) -> list[str]:
    return [queue_name(settings, shard) for shard in range(settings.shards)]


class ShardRouter:
    """Celery router: a task with ``orchestrator_id`` goes to that orchestrator's queue,
    one with ``shard`` (fan-out jobs) to that shard's queue."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def __call__(self, name: str, args: Any, kwargs: Any, options: Any, task: Any = None,
                 **_: Any) -> dict[str, str] | None:
        kwargs = kwargs or {}
        if "orchestrator_id" in kwargs:
            queue = queue_for(self.settings, kwargs["orchestrator_id"])
        elif "shard" in kwargs:
            shard = kwargs["shard"]
            if not isinstance(shard, int) or not 0 <= shard < self.settings.shards:
                last = self.settings.shards - 1
                raise MemoryValidationError(f"shard {shard!r} is not in 0..{last}")
            queue = queue_name(self.settings, shard)
        else:
            return None
        return {"queue": queue, "routing_key": queue}
