"""Routing: one orchestrator, one queue, always."""

from __future__ import annotations

from collections import Counter

import pytest

from orchmem.config import MemoryValidationError, load_settings
from orchmem.worker.routing import ShardRouter, queue_for, shard_for


def test_same_orchestrator_always_maps_to_the_same_queue() -> None:
    s = load_settings(environ={}, shards=8)
    assert {queue_for(s, "orch-a") for _ in range(100)} == {queue_for(s, "orch-a")}


def test_mapping_is_stable_across_processes() -> None:
    # blake2b, not Python's salted hash(): these values must never change, or
    # orchestrators would move between shards (and hosts) on restart.
    s = load_settings(environ={}, shards=8)
    assert [shard_for(s, f"orch-{i}") for i in range(6)] == [
        shard_for(s, f"orch-{i}") for i in range(6)]
    assert queue_for(s, "orch-a").startswith("memory.")


def test_orchestrators_spread_over_shards() -> None:
    s = load_settings(environ={}, shards=4)
    counts = Counter(shard_for(s, f"orch-{i}") for i in range(400))
    assert set(counts) == {0, 1, 2, 3}
    assert min(counts.values()) > 60


def test_pinned_orchestrator_goes_to_its_shard() -> None:
    s = load_settings(environ={}, shards=4, orchestrators={"orch-a": {"shard": 3}})
    assert queue_for(s, "orch-a") == "memory.3"


def test_router_routes_by_orchestrator_or_shard_and_rejects_bad_ids() -> None:
    s = load_settings(environ={}, shards=4)
    router = ShardRouter(s)
    route = router("orchmem.writeback", (), {"orchestrator_id": "orch-a"}, {})
    assert route == {"queue": queue_for(s, "orch-a"), "routing_key": queue_for(s, "orch-a")}
    assert router("x", (), {"shard": 2}, {}) == {"queue": "memory.2", "routing_key": "memory.2"}
    with pytest.raises(MemoryValidationError):
        router("x", (), {"orchestrator_id": "../etc"}, {})
    with pytest.raises(MemoryValidationError):
        router("x", (), {"shard": 9}, {})
