"""Draining the queues of shards that no longer exist, after ``shards`` was lowered.

Each message is moved, oldest first, to shard 0's control queue. Its worker finds it
on a queue that is not its orchestrator's, sees from the message's ``orchmemShards``
header that it was routed right under the old count, and forwards it (same task id)
to the orchestrator's queue now. Nothing is lost and nothing loops; receipts keep each
write exactly once. Raising ``shards`` needs no drain: every old queue is still read.
"""

from __future__ import annotations

import re

import redis

from orchmem.config import BrokerUnavailable, Settings
from orchmem.worker.runtime.redis_clients import broker_client
from orchmem.worker.runtime.shards import control_queue_name


def stale_queues(settings: Settings, client: redis.Redis) -> list[str]:
    """Queues of shards at or above ``settings.shards`` that hold messages."""
    pattern = re.compile(rf"^{re.escape(settings.queue_prefix)}\.(\d+)(\.control)?$")
    found = []
    for raw in client.scan_iter(match=f"{settings.queue_prefix}.*", count=500):
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        match = pattern.match(name)
        if match and int(match.group(1)) >= settings.shards and client.type(name) == b"list":
            found.append(name)
    return sorted(found)


def drain(settings: Settings, broker_url: str) -> dict[str, int]:
    """Move every message of the stale queues to shard 0's control queue; returns the
    count per queue. Raises BrokerUnavailable when the broker cannot be reached."""
    client = broker_client(broker_url, settings, socket_timeout=10)
    target = control_queue_name(settings, 0)
    moved: dict[str, int] = {}
    try:
        for queue in stale_queues(settings, client):
            count = 0
            # RPOPLPUSH takes the oldest (kombu pushes on the left, pops on the right)
            # and puts it behind the target's own waiting messages: order is kept.
            while client.rpoplpush(queue, target) is not None:
                count += 1
            moved[queue] = count
    except redis.RedisError as exc:
        raise BrokerUnavailable(f"cannot drain queues: broker unreachable ({exc})") from exc
    return moved
