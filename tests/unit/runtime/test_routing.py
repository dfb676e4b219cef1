"""Routing: one orchestrator, one queue, always."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from orchmem.config import MemoryValidationError, load_settings
from orchmem.worker.runtime.shards import ShardRouter, queue_for, shard_for


def test_same_orchestrator_always_maps_to_the_same_queue() -> None:
    s = load_settings(environ={}, shards=8)
    assert {queue_for(s, "orch-a") for _ in range(100)} == {queue_for(s, "orch-a")}


#: shard_for(orch-0..orch-11) with 8 shards, as first computed: pinned literally, so a
#: change of hash or of byte order cannot pass unnoticed.
PINNED_8_SHARDS = [5, 1, 3, 6, 4, 6, 7, 6, 5, 7, 6, 2]

_MAPPING_SCRIPT = """
import json
from orchmem.config import load_settings
from orchmem.worker.runtime.shards import queue_for, shard_for
s = load_settings(environ={}, shards=8)
print(json.dumps({"shards": [shard_for(s, f"orch-{i}") for i in range(12)],
                  "queue": queue_for(s, "orch-a"), "hash": hash("orch-0")}))
"""


def _mapping_in_subprocess(hash_seed: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
    env["PYTHONHASHSEED"] = hash_seed
    done = subprocess.run([sys.executable, "-c", _MAPPING_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_mapping_is_stable_across_processes() -> None:
    # blake2b, not Python's salted hash(): these values must never change, or
    # orchestrators would move between shards (and hosts) on restart.
    first, second = _mapping_in_subprocess("1"), _mapping_in_subprocess("4242")
    assert first["hash"] != second["hash"]  # the two processes really salt hash() apart
    assert first["shards"] == second["shards"] == PINNED_8_SHARDS
    assert first["queue"] == second["queue"] == "memory.7"
    s = load_settings(environ={}, shards=8)
    assert [shard_for(s, f"orch-{i}") for i in range(12)] == PINNED_8_SHARDS


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
