"""Readers in 4 threads and 2 processes while a worker writes 5,000 memories: no
"database is locked" reaches a caller, and the WAL stays bounded."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
from orchmem_testing import WorkerProcess, distinct_texts, settings_env

from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
READER = """
import json, sys, time
from orchmem.config import load_settings
from orchmem.models.storage.db.database import Databases
from orchmem.models.recall.search import recall
settings = load_settings()
databases = Databases(settings)
latencies, errors, deadline = [], [], time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    started = time.perf_counter()
    try:
        recall("busy", "quartz lagoon summit", databases=databases)
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    latencies.append((time.perf_counter() - started) * 1000)
print(json.dumps({"latencies": latencies, "errors": errors[:5], "n_errors": len(errors)}))
"""


def test_readers_never_see_locked_while_a_worker_writes_5000_memories(isolated: Any) -> None:
    settings = isolated(shards=1)
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    databases = Databases(settings)
    try:
        publish(app, WRITEBACK, "busy", "wb", {"memories": [
            {"type": "Fact", "content": "warm", "source": MANUAL}]})[1].get(timeout=60)
        texts = distinct_texts(5000, seed=13)
        results = [publish(app, WRITEBACK, "busy", "wb", {"memories": [
            {"type": "Fact", "content": t, "source": MANUAL} for t in texts[i:i + 50]]})[1]
            for i in range(0, 5000, 50)]
        processes = [subprocess.Popen([sys.executable, "-c", READER, "40"],
                                      env=settings_env(settings), stdout=subprocess.PIPE,
                                      text=True) for _ in range(2)]
        latencies: list[float] = []
        errors: list[str] = []
        wal_sizes: list[int] = []
        done = threading.Event()
        wal = settings.runtime_root("busy") / "memory" / "memory.db-wal"

        def read() -> None:
            while not done.is_set():
                started = time.perf_counter()
                try:
                    recall("busy", "amber harbor meadow", databases=databases)
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                latencies.append((time.perf_counter() - started) * 1000)

        def watch() -> None:
            while not done.is_set():
                wal_sizes.append(wal.stat().st_size if wal.exists() else 0)
                time.sleep(0.2)

        threads = [threading.Thread(target=read) for _ in range(4)]
        threads.append(threading.Thread(target=watch))
        for thread in threads:
            thread.start()
        try:
            for result in results:
                assert result.get(timeout=300)["ok"]
        finally:
            done.set()
            for thread in threads:
                thread.join()
        outside = [json.loads(p.communicate(timeout=120)[0]) for p in processes]
    finally:
        worker.stop()
    odb = databases.open("busy")
    with odb.bound():
        assert odb.db.execute_sql("SELECT count(*) FROM memories").fetchone()[0] == 5001
    writes = [r["durationMs"] for r in read_log(odb.workspace.log_path)
              if r["event"] == "task" and r["outcome"] == "ok"]
    all_reads = latencies + [x for o in outside for x in o["latencies"]]
    report = {"reads": len(all_reads), "read_p99_ms": round(float(np.percentile(all_reads, 99)), 1),
              "write_task_p99_ms": round(float(np.percentile(writes, 99)), 1),
              "wal_max_mb": round(max(wal_sizes) / 2**20, 1)}
    print("concurrency:", json.dumps(report))
    assert errors == [] and all(o["n_errors"] == 0 for o in outside), (errors, outside)
    assert len(all_reads) > 500
    assert max(wal_sizes) < 128 * 2**20  # journal_size_limit 64 MiB, plus one checkpoint's worth
