"""A batching worker killed (its pool child, or all of it) in the middle of a batch's
transaction, again and again: each batch is all or nothing, every write-back applies
exactly once, and in publish order.

Order: a killed pool child's batch runs again before anything after it, so its
tasks keep their place. The messages a killed worker held come back from the broker
after the visibility timeout, while the restarted worker already takes newer ones:
those (and only those) may land later, as with one message at a time.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from typing import Any

from orchmem_testing import WorkerProcess, distinct_texts, wait_until

from orchmem.models.core.shapes import derive_id
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
TASKS = 400
KILLS = 6


def query(path: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def unacked_keys(app: Any) -> set[str]:
    """Idempotency keys of the messages the broker holds as unacknowledged."""
    with app.connection_for_write() as conn:
        values = conn.default_channel.client.hvals("unacked")
    return {json.loads(v)[0]["headers"]["id"].split("/", 1)[1] for v in values}


def new_batch(log: Any, seen: int) -> list[str]:
    """The keys the newest batch the worker logged writes for the first time (``batch``,
    written just before its transaction begins), when there is one after ``seen``."""
    batches = [r for r in read_log(log) if r["event"] == "batch"]
    return list(batches[-1]["keys"]) if len(batches) > seen else []


def test_kills_in_the_middle_of_batches_apply_each_write_once_in_order(isolated: Any) -> None:
    settings = isolated(shards=1, worker={"visibility_timeout_s": 3, "max_deliveries": 10,
                                          "batch_max": 32})
    app = create_app(settings)
    orch = "batch-killed"
    path = settings.runtime_root(orch) / "memory" / "memory.db"
    texts = distinct_texts(TASKS, seed=31)
    worker = WorkerProcess(settings).start(app)
    publish(app, WRITEBACK, orch, "wb", {"memories": [
        {"type": "Fact", "content": "warm", "source": MANUAL}]})[1].get(timeout=90)
    worker.stop()
    # Everything waits in the queue, so the restarted worker takes large batches at once.
    keys = [f"w-{i}" for i in range(TASKS)]
    for key, text in zip(keys, texts, strict=True):
        publish(app, WRITEBACK, orch, "wb", {"memories": [
            {"type": "Fact", "content": text, "source": MANUAL}], "idempotencyKey": key})
    worker = WorkerProcess(settings).start(app)
    log = settings.runtime_root(orch) / "memory" / "logs" / "memory.log"
    held: set[str] = set()  # unacknowledged when the whole worker was killed
    landed = {"child": 0, "worker": 0}
    try:
        for kill in range(KILLS):
            logged = len([r for r in read_log(log) if r["event"] == "batch"])
            batch = wait_until(lambda: new_batch(log, logged), timeout=120,  # noqa: B023
                               interval=0.005, message=f"a batch in its transaction ({kill})")
            whole = kill % 2 == 1
            if whole:
                worker.kill()
                held |= unacked_keys(app)
            else:
                for pid in worker.pool_children():
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)  # the killed processes' files are closed
            statuses = {s for (s,) in query(path, "SELECT status FROM task_receipts WHERE key "
                                                  f"IN ({','.join('?' * len(batch))})",
                                            tuple(batch))}
            ids = tuple(derive_id("m", orch, key, 0) for key in batch)
            stored = query(path, "SELECT count(*) FROM memories WHERE memory_id IN "
                                 f"({','.join('?' * len(ids))})", ids)[0][0]
            # All or nothing: committed just before the kill (all done, all stored), or
            # killed mid-transaction (still started, nothing stored).
            assert (statuses == {"done"} and stored == len(batch)) or \
                (statuses == {"started"} and stored == 0), (statuses, stored, len(batch))
            if statuses == {"started"}:
                landed["worker" if whole else "child"] += 1
            if whole:
                worker = WorkerProcess(settings).start(app)
        wait_until(lambda: query(path, "SELECT count(*) FROM task_receipts WHERE status = 'done'")
                   [0][0] == TASKS + 1, timeout=300, interval=0.5, message="every task done")
    finally:
        worker.stop()
    assert landed["child"] >= 1 and landed["worker"] >= 1, landed
    rows = query(path, "SELECT memory_id, content FROM memories ORDER BY id")
    contents = [c for _, c in rows]
    assert sorted(contents[1:]) == sorted(texts) and len(set(contents)) == len(contents), \
        "a write lost or doubled"
    by_id = {derive_id("m", orch, k, 0): k for k in keys}
    applied = [by_id[m] for m, _ in rows[1:]]
    in_place = [k for k in applied if k not in held]
    assert in_place == [k for k in keys if k not in held], "a write out of publish order"
    assert len(in_place) >= TASKS // 2, len(in_place)
    assert query(path, "PRAGMA integrity_check")[0][0] == "ok"
