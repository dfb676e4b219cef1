"""Write-back throughput and publish→committed latency for one shard worker.

One run, one worker (``synchronous`` FULL by default):

1. a burst: N write-back tasks (one memory each) for one orchestrator, published as
   fast as possible; tasks/s from the first publish to the last commit;
2. a paced run: M tasks at ``--rate`` per second, publish→committed latency;
3. the floor: the embedding model alone on the burst's texts, in batches of
   ``--embed-batch``, in this process after the worker is idle (texts/s).

The burst's CPU time per task is reported for each part: the worker's parent, its pool
children, Redis and this process (publishing and waiting for results).

A commit's time is the ``updated_at`` its transaction wrote (for a batch, written
inside the batch's transaction, so at most one batch's duration before its commit).
In a burst the latency is mostly queueing; paced below capacity, the per-task cost.
``--batch-max 1`` turns batching off (one task per transaction, as before).
``--in-run`` writes each memory from a run's step (its source names a run), which logs
its snapshot on the execution log in the same transaction (the tape a rebuild from the
log reads).

    python benchmarks/writeback_throughput.py --tasks 1000 --paced-tasks 500 --rate 100
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

from _harness import emit, percentiles, redis_server, settings_for, temp_root, worker_process
from _procs import cpu_by_part, redis_pids, worker_pids

from orchmem.config import Settings
from orchmem.models.core.shapes import parse_ts
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.execlog.rules import new_run_id
from orchmem.models.storage.db.database import Databases
from orchmem.tasks.publish import envelope, send_envelope
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import OrchmemCelery, create_app
from orchmem.worker.runtime.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
#: A CPU-bound PyTorch process beside the worker (``--contention``): matrix products on
#: as many threads as there are cores, until it is killed.
CONTENDER = ("import torch\ntorch.set_num_threads(os.cpu_count() or 1)\n"
             "a = torch.randn(512, 512)\nwhile True:\n    a = torch.tanh(a @ a)\n")


def run(app: OrchmemCelery, orch: str, count: int, rate: float, tag: str,
        outbox: bool, source: dict[str, Any] = MANUAL) -> dict[str, Any]:
    """Publish ``count`` tasks (all at once, or at ``rate``/s); wait for every result.

    Without ``outbox`` the messages are sent as the client sends them, minus the
    outbox record (one SQLite commit per publish in the publishing process), so that
    the publisher is not what is measured."""
    published: dict[str, float] = {}
    results = []
    start = time.time()
    for i in range(count):
        if rate:
            time.sleep(max(0.0, start + i / rate - time.time()))
        content = f"{tag} memory {i}: the user mentioned item {i * 7919 % 10007} in {tag}"
        published[content] = time.time()
        payload = {"memories": [{"type": "Fact", "content": content, "source": source}]}
        results.append(publish(app, WRITEBACK, orch, "wb", payload)[1] if outbox else
                       send_envelope(app, envelope(orch, WRITEBACK, "wb", payload)))
    publish_s = time.time() - start
    failed = sum(1 for r in results if not r.get(timeout=900).get("ok"))
    return {"published": published, "start": start, "publish_s": publish_s, "failed": failed}


def figures(settings: Settings, orch: str, outcome: dict[str, Any]) -> dict[str, Any]:
    odb = Databases(settings).open(orch)
    with odb.bound():
        rows = odb.db.execute_sql("SELECT content, updated_at FROM memories").fetchall()
    committed = {content: parse_ts(at).timestamp() for content, at in rows}
    published = outcome["published"]
    latencies = [(committed[c] - t) * 1000 for c, t in published.items()]
    last_commit = max(committed[c] for c in published)
    return {
        "tasks": len(published),
        "publish_per_s": round(len(published) / outcome["publish_s"], 1),
        "tasks_per_s": round(len(published) / (last_commit - outcome["start"]), 1),
        "publish_to_commit_ms": percentiles(latencies),
        "failed": outcome["failed"],
    }


def embedder_floor(settings: Settings, texts: list[str], batch: int) -> tuple[float, float]:
    """The model alone on ``texts``: texts/s, and CPU ms per text (all its threads)."""
    embedder = get_embedder(settings.embedding)
    embedder.encode(texts[:batch])  # warm
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(texts), batch):
        embedder.encode(texts[i:i + batch])
    cpu_ms = (time.process_time() - cpu) * 1000 / len(texts)
    return round(len(texts) / (time.perf_counter() - start), 1), round(cpu_ms, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1000, help="tasks in the burst")
    parser.add_argument("--paced-tasks", type=int, default=500, help="tasks in the paced run")
    parser.add_argument("--rate", type=float, default=100.0, help="paced run: tasks/s")
    parser.add_argument("--batch-max", type=int, default=64,
                        help="worker.batch_max (1 = batching off)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="embedding.torch_threads of the worker (0 = torch's default)")
    parser.add_argument("--onnx-threads", type=int, default=0,
                        help="embedding.onnx_threads of the worker and the floor "
                             "(0 = ONNX Runtime's default: one per core)")
    parser.add_argument("--embed-batch", type=int, default=64)
    parser.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    parser.add_argument("--contention", action="store_true",
                        help="run a CPU-bound PyTorch process beside the worker")
    parser.add_argument("--outbox", action="store_true",
                        help="publish through the outbox, as the client does")
    parser.add_argument("--task-events", action=argparse.BooleanOptionalAction, default=True,
                        help="worker.task_events of the shard worker (Flower's task view)")
    parser.add_argument("--root", help="keep the data here (default: a temp folder)")
    parser.add_argument("--in-run", action="store_true",
                        help="each memory written from a run's step (snapshotted on the log)")
    args = parser.parse_args()
    contender = None
    with temp_root(args.root) as root, redis_server(root / "redis") as url:
        settings = settings_for(root, url, shards=1,
                                worker={"sqlite_synchronous": args.synchronous,
                                        "batch_max": args.batch_max,
                                        "task_events": args.task_events},
                                embedding={"torch_threads": args.torch_threads,
                                           "onnx_threads": args.onnx_threads})
        app = create_app(settings)
        orch = "bench-writeback"
        with worker_process(settings):
            # One warm-up task: model loaded and database created before timing.
            publish(app, WRITEBACK, orch, "wb", {"memories": [
                {"type": "Fact", "content": "warm-up", "source": MANUAL}]})[1].get(timeout=120)
            if args.contention:
                contender = subprocess.Popen([sys.executable, "-c", "import os\n" + CONTENDER])
                time.sleep(2)
            processes = worker_pids(root / "bench.toml"), redis_pids(url)
            try:
                cpu_start = cpu_by_part(*processes)
                source = {"sourceType": "workflow_output", "capturedBy": "system",
                          "workflowRunId": new_run_id(orch), "stepId": "bench"} \
                    if args.in_run else MANUAL
                burst = run(app, orch, args.tasks, 0.0, "burst", args.outbox, source)
                cpu_end = cpu_by_part(*processes)
                paced = run(app, orch, args.paced_tasks, args.rate, "paced", args.outbox,
                            source) if args.paced_tasks else None
            finally:
                if contender is not None:
                    contender.kill()
                    contender.wait()
        burst_figures = figures(settings, orch, burst)
        floor, floor_cpu_ms = embedder_floor(settings, list(burst["published"]), args.embed_batch)
        emit({
            "benchmark": "writeback_throughput",
            "shards": 1,
            "batch_max": args.batch_max,
            "task_events": args.task_events,
            "torch_threads": args.torch_threads,
            "onnx_threads": args.onnx_threads,
            "contention": args.contention,
            "sqlite_synchronous": args.synchronous,
            "publish_path": "outbox" if args.outbox else "direct",
            "in_run": args.in_run,
            "cores": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            **{k: v for k, v in burst_figures.items() if k != "tasks"},
            "burst_tasks": args.tasks,
            "embedder_texts_per_s": floor,
            # CPU per task of each part during the burst, in ms: what is not the model
            # (in worker_children) is what keeps the burst from the floor.
            "burst_cpu_ms_per_task": {part: round((cpu_end[part] - cpu_start[part]) * 1000 /
                                                  args.tasks, 2) for part in cpu_end},
            "embedder_batch": args.embed_batch,
            "embedder_cpu_ms_per_text": floor_cpu_ms,
            "paced": None if paced is None else {
                "offered_per_s": args.rate, **figures(settings, orch, paced)},
        })


if __name__ == "__main__":
    main()
