"""Searching a runtime root and a broker for a forgotten word (the hard-forget tests)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import redis


def files_with(root: Path, word: bytes) -> list[str]:
    """Every file under ``root`` (symlinks not followed) whose bytes hold ``word``."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if not path.is_symlink() and word in path.read_bytes().lower():
                found.append(str(path.relative_to(root)))
    return sorted(found)


def keys_with(client: redis.Redis, word: bytes) -> list[str]:
    """Every key of the Redis database whose name or value holds ``word``."""
    found = []
    for key in client.keys("*"):
        kind = client.type(key).decode()
        if kind == "string":
            parts = [client.get(key) or b""]
        elif kind == "hash":
            parts = [b for pair in client.hgetall(key).items() for b in pair]
        elif kind == "list":
            parts = client.lrange(key, 0, -1)
        elif kind == "set":
            parts = list(client.smembers(key))
        elif kind == "zset":
            parts = client.zrange(key, 0, -1)
        else:
            parts = [client.dump(key) or b""]
        if any(word in part.lower() for part in [key, *parts]):
            found.append(key.decode())
    return sorted(found)


def wait_for_aof_rewrite(client: redis.Redis) -> None:
    for _ in range(300):
        info = client.info("persistence")
        if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
            return
        time.sleep(0.1)
    pytest.fail("the AOF rewrite did not finish")
