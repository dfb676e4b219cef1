"""Bulletin build time at 1k and 10k memories, and the per-message cost of ``context_for``.

Builds orchestrators of generated memories (as recall_latency does), then:

- times ``models.bulletin.build`` in process (p50/p95), the pure part;
- starts a private Redis and a worker and times ``MemoryClient.context_for("selector",
  message)`` end to end: the bulletin task through the queue and back, plus a recall
  (p50/p95), which is what an orchestrator pays on every message.

    python benchmarks/bulletin.py [--sizes 1000 10000] [--messages 200]
"""

from __future__ import annotations

import argparse
import random
import time

from _harness import emit, percentiles, redis_server, settings_for, temp_root, worker_process
from recall_latency import PEOPLE, QUESTIONS, THINGS, build

from orchmem.models.bulletin.compose import build as build_bulletin
from orchmem.models.core.shapes import utc_now
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.storage.db.database import Databases
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import create_app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--root", help="keep the data here (default: a temp folder)")
    args = parser.parse_args()
    rng = random.Random(11)
    messages = [rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), t=rng.choice(THINGS))
                for _ in range(args.messages)]
    results = {}
    with temp_root(args.root) as root, redis_server(root / "redis") as url:
        settings = settings_for(root, url, shards=1)
        databases = Databases(settings)
        embedder = get_embedder(settings.embedding)
        for size in args.sizes:
            orch = f"bench-bulletin-{size}"
            odb = databases.open(orch)
            assert odb is not None
            if odb.meta("bench_size") != str(size):
                build(databases, orch, size, embedder, seed=size)
                from orchmem.models.storage.memories.events import set_meta

                with odb.write():
                    set_meta("bench_size", str(size))
            timings = []
            for _ in range(args.messages):
                started = time.perf_counter()
                build_bulletin(odb, utc_now())
                timings.append((time.perf_counter() - started) * 1000)
            results[str(size)] = {"memories": size, "build_ms": percentiles(timings)}
        app = create_app(settings)
        with worker_process(settings):
            for size in args.sizes:
                client = MemoryClient(f"bench-bulletin-{size}", settings, app=app)
                for message in messages[:10]:  # warm: model, index, connections
                    client.context_for("selector", message)
                timings, sources = [], set()
                for message in messages:
                    started = time.perf_counter()
                    context = client.context_for("selector", message)
                    timings.append((time.perf_counter() - started) * 1000)
                    sources.add(context.bulletin.source)
                results[str(size)]["context_for_ms"] = percentiles(timings)
                results[str(size)]["bulletin_sources"] = sorted(sources)
    emit({"benchmark": "bulletin", "messages": args.messages, "results": results})


if __name__ == "__main__":
    main()
