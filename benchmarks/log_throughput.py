"""Execution log: append throughput and ``orchmem log`` latency up to 1M events.

Phases (one orchestrator, its real memory.db):

1. ``tasks``: the log task's own code in-process (``MemoryClient(..., immediate=True)``:
   validation, receipt, append, run row, episode of an ended run), one event per task
   and ``--batch`` events per task;
2. ``fill``: :func:`orchmem.models.storage.execlog.entries.append` with a receipt per
   transaction of 1,000 events (what a batched task does), up to ``--events``, in runs
   of 100 events with ~200-character texts; throughput per 100k;
3. ``tasks_at_size``: phase 1 again on the full log (indexes must not slow appends);
4. ``read``: ``read_log`` as ``orchmem log`` calls it: the first page, a page from a
   cursor in the middle and at the end, one run's events, ``--since`` the last minute;
   each 30 times, alternating, p50/p95 in ms; and the whole ``orchmem log`` command
   (a process: Python start-up, imports, open) 5 times.

    python benchmarks/log_throughput.py                    # 1M events
    python benchmarks/log_throughput.py --events 200000 --root /tmp/lt
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _harness import emit, percentiles, settings_for, temp_root

from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.execlog.rules import LogEventInput, new_run_id
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.delivery import receipts
from orchmem.models.storage.execlog import entries as execlog
from orchmem.worker import MemoryClient

ORCH = "log-bench"
TEXT = ("Checked the deployment manifest for the billing service and found the replica "
        "count below the agreed minimum; raised it and re-applied the change to the canary "
        "hosts before the full rollout. ")


def task_phase(memory: MemoryClient, single: int, batch: int, batches: int) -> dict[str, Any]:
    run = memory.run("bench")
    started = time.perf_counter()
    for n in range(single):
        memory.log_event(events=[{"runId": run.run_id, "kind": "note", "text": TEXT,
                                  "idempotencyKey": f"s-{run.run_id}-{n}"}])
    one = time.perf_counter() - started
    started = time.perf_counter()
    for b in range(batches):
        events = [{"runId": run.run_id, "kind": "tool_call", "name": "kubectl",
                   "text": TEXT, "idempotencyKey": f"b-{run.run_id}-{b}-{n}"}
                  for n in range(batch)]
        memory.log_event(events=events)
    many = time.perf_counter() - started
    return {"one_per_task": {"events": single, "events_per_s": round(single / one, 1)},
            f"{batch}_per_task": {"events": batch * batches,
                                  "events_per_s": round(batch * batches / many, 1)}}


def fill(databases: Databases, total: int, start: int) -> list[dict[str, Any]]:
    odb = databases.open(ORCH)
    assert odb is not None
    report, done, mark = [], start, time.perf_counter()
    run_id = new_run_id(ORCH)
    while done < total:
        events = []
        for n in range(1000):
            if (done + n) % 100 == 0:
                run_id = new_run_id(ORCH)
            events.append(LogEventInput.model_construct(
                run_id=run_id, kind="tool_call" if n % 3 else "prompt", name="kubectl",
                text=TEXT, idempotency_key=f"f-{done + n}", step_id=f"s{n % 7}",
                span_id=None, parent_id=None, status=None, actor="bench", digest=None,
                data=None, checkpoint=None, replay=False, at=None))
        key = f"fill-{done}"
        with odb.write():
            execlog.append(odb, key, events, format_ts(utc_now()))
            receipts.finish(key, receipts.DONE, {"ok": True, "task": "bench"})
        done += len(events)
        if done % 100_000 == 0:
            now = time.perf_counter()
            report.append({"at": done, "events_per_s": round(100_000 / (now - mark), 1)})
            mark = now
    return report


def read_phase(databases: Databases, reps: int) -> dict[str, Any]:
    odb = databases.open(ORCH)
    assert odb is not None
    last = int(odb.sql("SELECT max(seq) FROM log_events")[0][0])
    run_id = odb.sql("SELECT run_id FROM log_events WHERE seq = ?", (last - 50,))[0][0]
    since = odb.sql("SELECT recorded_at FROM log_events WHERE seq = ?", (last - 500,))[0][0]
    cases = {
        "first_page": {"after": 0},
        "middle_page": {"after": last // 2},
        "last_page": {"after": last - 100},
        "one_run": {"run_id": run_id},
        "since_recent": {"since": since},
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(reps):
        for name, kwargs in cases.items():
            started = time.perf_counter()
            events, _cursor = execlog.read_log(odb, limit=100, **kwargs)
            times[name].append((time.perf_counter() - started) * 1000)
            assert events
    return {"events_in_log": last,
            **{name: percentiles(values, (50, 95)) for name, values in times.items()}}


def cli_phase(root: Path, runs: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
    exe = Path(sys.executable).with_name("orchmem")
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([str(exe), "--root", str(root), "log", "--orch", ORCH, "--limit",
                        "100", "--cursor", "999000", "--json"], env=env, check=True,
                       capture_output=True)
        walls.append((time.perf_counter() - started) * 1000)
    return {"orchmem_log_command_ms": percentiles(walls, (50,)), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--single", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--root")
    args = parser.parse_args()
    with temp_root(args.root) as root:
        settings = settings_for(root, "")
        memory = MemoryClient(ORCH, settings, immediate=True)
        out: dict[str, Any] = {"load": os.getloadavg()}
        out["tasks"] = task_phase(memory, args.single, args.batch, args.batches)
        start = int(memory.databases.open(ORCH).sql(  # type: ignore[union-attr]
            "SELECT count(*) FROM log_events")[0][0])
        started = time.perf_counter()
        out["fill"] = fill(memory.databases, args.events, start)
        out["fill_s"] = round(time.perf_counter() - started, 1)
        out["tasks_at_size"] = task_phase(memory, args.single, args.batch, args.batches)
        out["read"] = read_phase(memory.databases, args.reps)
        out["cli"] = cli_phase(root, 5)
        out["db_bytes"] = settings.runtime_root(ORCH).joinpath("memory", "memory.db") \
            .stat().st_size
        out["load_after"] = os.getloadavg()
        emit(out)


if __name__ == "__main__":
    main()
