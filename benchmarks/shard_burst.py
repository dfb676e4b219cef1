"""A write-back burst across shards: does throughput grow with shard workers and publishers?

For each number of shards K and of publishers P: a fresh root and Redis, settings
``shards = K``, one ``orchmem worker --shard i`` process per shard (``onnx_threads`` =
cores // K each, batching on), ``--orchs-per-shard`` orchestrators per shard (names
picked with the project's own ``shard_for``), a warm-up write-back to each (databases
created, models loaded), then a burst of K x ``--tasks-per-shard`` write-backs (one
memory each) published by P publisher processes round-robin over the orchestrators.
tasks/s = tasks / (last result received - first publish). After the runs, the
embedder's floor: one process, every core, batches of 64, on the same kind of text.

Prints one JSON line per (K, P), then a summary: tasks/s per run, each K's speedup over
one shard with the same publishers, the floor, and the load average (the machine is
shared: compare runs made together).

    python benchmarks/shard_burst.py --shards 1 2 --publishers 1 2 --tasks-per-shard 400
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time
from contextlib import ExitStack
from typing import Any

from _harness import redis_server, settings_for, temp_root, worker_process

from orchmem.config import Settings
from orchmem.models.embedding.embedders import get_embedder
from orchmem.tasks.publish import envelope, send_envelope
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.shards import shard_for

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def names_by_shard(settings: Settings, shards: int, per_shard: int) -> list[str]:
    """``per_shard`` orchestrator names routed to each shard, shard by shard."""
    picked: dict[int, list[str]] = {i: [] for i in range(shards)}
    j = 0
    while any(len(names) < per_shard for names in picked.values()):
        name = f"burst-o{j}"
        shard = shard_for(settings, name)
        if len(picked[shard]) < per_shard:
            picked[shard].append(name)
        j += 1
    return [name for i in range(shards) for name in picked[i]]


def publisher(job: tuple[Settings, list[str], int, int, str]) -> tuple[float, float, int, int]:
    """Publish ``count`` write-backs round-robin over ``orchs``, then wait for each:
    (first publish, last result, tasks, failed)."""
    settings, orchs, count, offset, tag = job
    app = create_app(settings)
    results = []
    start = time.time()
    for i in range(count):
        n = offset + i
        orch = orchs[n % len(orchs)]
        content = f"{tag} memory {n}: the user mentioned item {n * 7919 % 10007} in {orch}"
        payload = {"memories": [{"type": "Fact", "content": content, "source": MANUAL}]}
        results.append(send_envelope(app, envelope(orch, WRITEBACK, "wb", payload)))
    failed = sum(1 for r in results if not r.get(timeout=900).get("ok"))
    return start, time.time(), count, failed


def floor(settings: Settings, n: int) -> float:
    """The model alone, this process, every core: texts per second in batches of 64."""
    embedder = get_embedder(settings.embedding)
    texts = [f"floor memory {i}: the user mentioned item {i * 7919 % 10007}" for i in range(n)]
    embedder.encode(texts[:64])
    started = time.perf_counter()
    for i in range(0, n, 64):
        embedder.encode(texts[i:i + 64])
    return round(n / (time.perf_counter() - started), 1)


def one(shards: int, publishers: int, per_shard_tasks: int, orchs_per_shard: int
        ) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    with temp_root(None) as root, redis_server(root / "redis") as url:
        settings = settings_for(root, url, shards=shards, worker={"batch_max": 64},
                                embedding={"onnx_threads": max(1, cores // shards)})
        orchs = names_by_shard(settings, shards, orchs_per_shard)
        with ExitStack() as stack:
            for i in range(shards):
                stack.enter_context(worker_process(settings, shards=[i]))
            publisher((settings, orchs, len(orchs), 0, "warm"))
            share = shards * per_shard_tasks // publishers
            with mp.get_context("spawn").Pool(publishers) as pool:
                out = pool.map(publisher, [(settings, orchs, share, p * share, "burst")
                                           for p in range(publishers)])
    start, end = min(o[0] for o in out), max(o[1] for o in out)
    done, failed = sum(o[2] for o in out), sum(o[3] for o in out)
    return {"shards": shards, "publishers": publishers, "cores": cores, "tasks": done,
            "failed": failed, "tasks_per_s": round(done / (end - start), 1),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--publishers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tasks-per-shard", type=int, default=400)
    parser.add_argument("--orchs-per-shard", type=int, default=2)
    parser.add_argument("--floor-texts", type=int, default=1000,
                        help="texts for the embedder's floor (0: not measured)")
    args = parser.parse_args()
    rows = []
    for publishers in args.publishers:
        for shards in args.shards:
            row = one(shards, publishers, args.tasks_per_shard, args.orchs_per_shard)
            print(json.dumps(row), flush=True)
            rows.append(row)
    speedup = {f"{r['shards']}x{r['publishers']}": round(r["tasks_per_s"] / next(
        b["tasks_per_s"] for b in rows if b["shards"] == args.shards[0]
        and b["publishers"] == r["publishers"]), 2) for r in rows}
    with temp_root(None) as root:
        fl = floor(settings_for(root, "", embedding={"onnx_threads": 0}),
                   args.floor_texts) if args.floor_texts else None
    print(json.dumps({"benchmark": "shard_burst",
                      "tasks_per_s": {f"{r['shards']}x{r['publishers']}": r["tasks_per_s"]
                                      for r in rows},
                      "speedup_over_first_shards": speedup, "embedder_floor": fl,
                      "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)


if __name__ == "__main__":
    main()
