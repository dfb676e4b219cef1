"""Recall's read path alone: every query vector cached, so no model runs in the timing.

Runs the questions of ``recall_latency.py`` against its databases (``--root``, built by
that benchmark) once to fill the query-vector cache, then ``--rounds`` more times,
timing each recall by the wall clock and by this thread's CPU time (less disturbed
than the wall clock when other processes share the cores). Run it alternately with
an old release (``PYTHONPATH``) to compare the work a recall does after the embedding.

    python benchmarks/recall_read_path.py --root /tmp/rl --sizes 1000 10000 [--no-router]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from _harness import emit, percentiles
from recall_latency import PEOPLE, QUESTIONS, THINGS

from orchmem.config import load_settings
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases


def measure(databases: Databases, orch: str, queries: list[str], rounds: int) -> dict[str, Any]:
    for query in queries:  # the cache holds every query vector from here on
        recall(orch, query, databases=databases)
    wall, cpu = [], []
    for _ in range(rounds):
        for query in queries:
            started, cpu_started = time.perf_counter(), time.thread_time()
            recall(orch, query, databases=databases)
            cpu.append((time.thread_time() - cpu_started) * 1000)
            wall.append((time.perf_counter() - started) * 1000)
    return {"wall_ms": percentiles(wall), "cpu_ms": percentiles(cpu)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="recall_latency.py's --root")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--router", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    settings = load_settings(environ={}, root=args.root, broker_url="", embedding={
        "query_cache_size": max(1000, args.queries), "torch_threads": 1},
        memory={"retrieval": {"router": args.router}})
    databases = Databases(settings)
    rng = random.Random(7)
    queries = [rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), t=rng.choice(THINGS))
               for _ in range(args.queries)]
    emit({"benchmark": "recall_read_path", "router": args.router, "results": {
        str(size): measure(databases, f"bench-recall-{size}", queries, args.rounds)
        for size in args.sizes}})


if __name__ == "__main__":
    main()
