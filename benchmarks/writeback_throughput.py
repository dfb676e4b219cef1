"""Write-back throughput and publish→committed latency for one worker.

Publishes N write-back tasks (one memory each) for one orchestrator as fast as it
can, waits until all are committed, and prints JSON: tasks/s (first publish to last
commit) and p50/p95/p99 publish→committed latency. A commit's time is the
``updated_at`` its transaction wrote. In a burst the latency is mostly queueing; with
``--rate`` below the worker's capacity it is the per-task cost.

    python benchmarks/writeback_throughput.py --tasks 1000
"""

from __future__ import annotations

import argparse
import time

from _harness import emit, percentiles, redis_server, settings_for, temp_root, worker_process

from orchmem.models.schema import parse_ts
from orchmem.models.storage.database import Databases
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.app import create_app
from orchmem.worker.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="publish at this many tasks/s (default 0: all at once, a burst)")
    parser.add_argument("--root", help="keep the data here (default: a temp folder)")
    args = parser.parse_args()
    with temp_root(args.root) as root, redis_server(root / "redis") as url:
        settings = settings_for(root, url, shards=1,
                                worker={"sqlite_synchronous": args.synchronous})
        app = create_app(settings)
        orch = "bench-writeback"
        with worker_process(settings):
            # One warm-up task: model loaded and database created before timing.
            publish(app, WRITEBACK, orch, "wb", {"memories": [
                {"type": "Fact", "content": "warm-up", "source": MANUAL}]})[1].get(timeout=120)
            published: dict[str, float] = {}
            results = []
            start = time.time()
            for i in range(args.tasks):
                if args.rate:
                    time.sleep(max(0.0, start + i / args.rate - time.time()))
                content = f"benchmark memory {i}: the user mentioned item {i * 7919 % 10007}"
                published[content] = time.time()
                results.append(publish(app, WRITEBACK, orch, "wb", {"memories": [
                    {"type": "Fact", "content": content, "source": MANUAL}]})[1])
            publish_s = time.time() - start
            for result in results:
                result.get(timeout=600)
        odb = Databases(settings).open(orch)
        with odb.bound():
            rows = odb.db.execute_sql("SELECT content, updated_at FROM memories").fetchall()
        committed = {content: parse_ts(at).timestamp() for content, at in rows}
        latencies = [(committed[c] - t) * 1000 for c, t in published.items()]
        last_commit = max(committed[c] for c in published)
        emit({
            "benchmark": "writeback_throughput",
            "tasks": args.tasks,
            "shards": 1,
            "sqlite_synchronous": args.synchronous,
            "mode": f"paced at {args.rate}/s" if args.rate else "burst",
            "publish_per_s": round(args.tasks / publish_s, 1),
            "tasks_per_s": round(args.tasks / (last_commit - start), 1),
            "publish_to_commit_ms": percentiles(latencies),
            "stored": len(committed) - 1,
        })


if __name__ == "__main__":
    main()
