"""CPU time per write-back task in ``apply_batch`` (what a batching child runs), no broker.

CPU time (``time.process_time``, every thread of the process, the model's included)
moves much less with other processes' load than wall time, so two versions can be
compared on a busy machine (run it with ``PYTHONPATH`` pointing at the other one,
alternating). Two shapes, each timed after a warm-up:

1. one orchestrator, jobs of ``--batch`` explicit one-memory write-backs (the burst of
   ``writeback_throughput.py``), timed over the last quarter of ``--tasks``;
2. the soak's shape: ``--orchestrators`` orchestrators with one transcript write-back
   each per job (the rules extractor words the memory).

    python benchmarks/batch_cpu.py --tasks 2048 --batch 64
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from _harness import emit, settings_for, temp_root

from orchmem.tasks.batch import SUCCESS, Waiting, apply_batch
from orchmem.tasks.publish import envelope
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_immediate_app

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
WORDS = "amber basil cedar delta ember fjord garnet harbor indigo juniper kettle lantern".split()


def waiting(orch: str, payload: dict[str, Any]) -> Waiting:
    env = envelope(orch, WRITEBACK, "wb", payload)
    return Waiting(id=env.task_id, kwargs=env.kwargs, request={"delivery_info": {}})


def timed(task: Any, jobs: list[list[Waiting]]) -> dict[str, float]:
    """CPU and wall milliseconds per task over ``jobs``."""
    cpu, wall, count = time.process_time(), time.perf_counter(), 0
    for job in jobs:
        outcomes = apply_batch(task, job)
        if any(o.state != SUCCESS for o in outcomes):
            raise RuntimeError(f"a task failed: {outcomes}")
        count += len(job)
    return {"cpu_ms_per_task": round((time.process_time() - cpu) * 1000 / count, 2),
            "wall_ms_per_task": round((time.perf_counter() - wall) * 1000 / count, 2)}


def burst_jobs(tasks: int, batch: int) -> list[list[Waiting]]:
    facts = [waiting("one", {"memories": [{"type": "Fact", "source": MANUAL, "content":
                                           f"burst memory {i}: the user mentioned item "
                                           f"{i * 7919 % 10007} in burst"}]})
             for i in range(tasks)]
    return [facts[i:i + batch] for i in range(0, tasks, batch)]


def soak_jobs(jobs: int, orchestrators: int) -> list[list[Waiting]]:
    def said(o: int, j: int) -> str:
        return f"I prefer {WORDS[(j + o) % 12]} {WORDS[(j * 3 + o) % 12]} number {o}-{j}."

    return [[waiting(f"soak-{o}", {"channelTranscript": {"conversationId": "c", "messages": [
        {"role": "user", "text": said(o, j)}, {"role": "assistant", "text": "Noted!"}]}})
        for o in range(orchestrators)] for j in range(jobs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=2048, help="one orchestrator's burst")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--orchestrators", type=int, default=5, help="the soak's shape")
    parser.add_argument("--soak-jobs", type=int, default=60)
    parser.add_argument("--root", help="keep the data here (default: a temp folder)")
    args = parser.parse_args()
    with temp_root(args.root) as root:
        app = create_immediate_app(settings_for(root, "redis://127.0.0.1:1/0"))
        task = app.tasks[WRITEBACK]
        jobs = burst_jobs(args.tasks, args.batch)
        warm = len(jobs) * 3 // 4
        timed(task, jobs[:warm])
        burst = timed(task, jobs[warm:])
        soak = soak_jobs(args.soak_jobs, args.orchestrators)
        timed(task, soak[: len(soak) // 6])
        emit({"benchmark": "batch_cpu", "tasks": args.tasks, "batch": args.batch,
              "burst_timed_after_memories": warm * args.batch, "burst": burst,
              "orchestrators": args.orchestrators, "soak_shape": timed(task, soak[len(soak) // 6:]),
              "load_avg_1m": round(os.getloadavg()[0], 2)})


if __name__ == "__main__":
    main()
