"""Remote recall (through the read queue and ``orchmem reader``) against local recall.

Builds one orchestrator of ``--size`` memories (as ``recall_latency.py`` does), starts
a private Redis and a reader worker, then times, alternating query by query in one run,
``MemoryClient(orch).recall`` (reads the file) and ``MemoryClient(orch,
remote=True).recall`` (a message to the shard's read queue, the reader's recall, the
result back through Redis). p50/p95/p99 in ms, and the difference of the medians.

    python benchmarks/remote_recall.py --size 10000 --queries 200
"""

from __future__ import annotations

import argparse
import random
import time
from contextlib import AbstractContextManager

from _harness import emit, orchmem_process, percentiles, redis_server, settings_for, temp_root
from recall_latency import PEOPLE, QUESTIONS, THINGS, build

from orchmem.config import Settings
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.memories.events import set_meta
from orchmem.worker import MemoryClient


def reader_process(settings: Settings, concurrency: int) -> AbstractContextManager[None]:
    """``orchmem reader`` in a subprocess, answering pings when the block starts."""
    return orchmem_process(settings, "reader", "--concurrency", str(concurrency))


def ensure_built(settings: Settings, orch: str, size: int) -> float:
    """Build the orchestrator's memories unless a kept root already holds them."""
    databases = Databases(settings)
    odb = databases.open(orch)
    assert odb is not None
    if odb.meta("bench_size") == str(size):
        return 0.0
    build_s = build(databases, orch, size, get_embedder(settings.embedding), seed=size)
    with odb.write():
        set_meta("bench_size", str(size))
    return build_s


def _time(client: MemoryClient, query: str) -> tuple[float, list[str]]:
    started = time.perf_counter()
    bundle = client.recall(query)
    elapsed = (time.perf_counter() - started) * 1000
    assert not bundle.warnings, bundle.warnings
    return elapsed, bundle.memory_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--root", help="keep the database here and reuse it (default: temp)")
    parser.add_argument("--task-events", action="store_true",
                        help="the reader sends Celery task events (reader.task_events)")
    args = parser.parse_args()
    rng = random.Random(7)
    queries = [rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), t=rng.choice(THINGS))
               for _ in range(args.queries)]
    with temp_root(args.root) as root, redis_server(root / "redis") as url:
        settings = settings_for(root, url, reader={"task_events": args.task_events})
        orch = f"bench-remote-{args.size}"
        build_s = ensure_built(settings, orch, args.size)
        local, remote = MemoryClient(orch, settings), MemoryClient(orch, settings, remote=True)
        with reader_process(settings, args.concurrency):
            for query in queries[:20]:  # warm both sides: index loaded, caches hot
                _time(local, query), _time(remote, query)
            local_ms, remote_ms, same = [], [], 0
            for query in queries:
                here, ids_here = _time(local, query)
                there, ids_there = _time(remote, query)
                local_ms.append(here)
                remote_ms.append(there)
                same += ids_here == ids_there
    lp, rp = percentiles(local_ms), percentiles(remote_ms)
    emit({"benchmark": "remote_recall", "memories": args.size, "queries": args.queries,
          "reader_concurrency": args.concurrency, "reader_task_events": args.task_events,
          "build_s": round(build_s, 1),
          "local_ms": lp, "remote_ms": rp,
          "p50_overhead_ms": round(rp["p50"] - lp["p50"], 3),
          "same_ids_and_order": f"{same}/{len(queries)}"})


if __name__ == "__main__":
    main()
