"""Publish latency with many pending outbox entries, and pruning them.

A real Redis and no worker: every write-back is recorded in the outbox, published,
and stays pending. Before the measured writes, ``--pending`` entries are put in the
outbox as published-but-unfinished (the state of a long worker outage). Prints JSON:
per pending count, ``write_back`` latency p50/p95/p99 over ``--writes`` calls, and the
seconds one ``prune_done`` takes over all entries (or its error).

    python benchmarks/outbox_publish.py --pending 0 10000 100000 --writes 200
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from _harness import emit, percentiles, redis_server, settings_for, temp_root

from orchmem.worker.client.memory_client import MemoryClient

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def fill(path: Path, count: int) -> None:
    """``count`` published, unfinished write-backs, written straight into outbox.db."""
    payload = json.dumps({"memories": [{"type": "Fact", "content": "x" * 200,
                                        "source": MANUAL}]})
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT OR IGNORE INTO outbox (key, task, payload, created_at, published_at, "
            "attempts) VALUES (?, 'orchmem.writeback', ?, '2026-01-01T00:00:00.000000Z', "
            "'2026-01-01T00:00:01.000000Z', 1)",
            ((f"wb-old-{i:07d}", payload) for i in range(count)))
    conn.close()


def prune_seconds(client: MemoryClient) -> dict[str, Any]:
    try:
        from orchmem.models.storage.db.database import Databases
        from orchmem.models.storage.delivery.outbox import prune_done
    except ImportError:  # releases before the storage layer
        from orchmem.models.database import Databases  # type: ignore[import-not-found,no-redef]
        from orchmem.models.outbox import prune_done  # type: ignore[import-not-found,no-redef]
    odb = Databases(client.settings).open(client.orchestrator_id)  # a writer: creates it
    started = time.perf_counter()
    try:
        left = prune_done(client.outbox, odb)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:120]}"}
    return {"seconds": round(time.perf_counter() - started, 3), "left": len(left)}


def run(root: Path, broker: str, pending: int, writes: int) -> dict[str, Any]:
    settings = settings_for(root / f"p{pending}", broker)
    client = MemoryClient(f"outbox-{pending}", settings)
    warm = client.write_back(memories=[{"type": "Fact", "content": "warm", "source": MANUAL}])
    assert warm.ok, warm.error
    fill(client.outbox.path, pending)
    latencies = []
    for i in range(writes):
        started = time.perf_counter()
        handle = client.write_back(memories=[{"type": "Fact", "content": f"fact {i}",
                                              "source": MANUAL}])
        latencies.append((time.perf_counter() - started) * 1000)
        assert handle.ok, handle.error
    return {"pending": pending, "write_back_ms": percentiles(latencies),
            "prune": prune_seconds(client)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, nargs="+", default=[0, 10_000, 100_000])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--root", help="Work folder (default: a temporary one).")
    args = parser.parse_args()
    with temp_root(args.root) as root, redis_server(root / "redis") as broker:
        emit({"benchmark": "outbox_publish", "writes": args.writes,
              "runs": [run(root, broker, n, args.writes) for n in args.pending]})


if __name__ == "__main__":
    main()
