"""Workers crash, tasks overrun, a task kills its worker every time, children recycle,
tasks are replayed: every write applies exactly once, in order, and nothing is lost."""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

from orchmem_testing import WorkerProcess, distinct_texts, receipt, settings_env, wait_until

from orchmem.models.core.shapes import derive_id
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.delivery.deadletters import dead_letters
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.edits import EDIT
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.tasks.maintenance import DEADLETTER_RETRY
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import OrchmemCelery, create_app
from orchmem.worker.runtime.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def fact(text: str) -> dict[str, Any]:
    return {"type": "Fact", "content": text, "source": MANUAL}


def unacked(app: OrchmemCelery) -> int:
    with app.connection_for_write() as conn:
        return int(conn.default_channel.client.hlen("unacked"))


def test_a_thousand_tasks_survive_five_worker_kills_exactly_once_and_in_order(
        isolated: Any) -> None:
    # Beat runs as in production: a message SIGKILL takes in kombu's window between
    # BRPOP and its unacked record (kombu #305, celery #7950) is gone from Redis; the
    # publish recorded it in the outbox, and beat's reconciliation sends it again.
    settings = isolated(shards=1, worker={"visibility_timeout_s": 3, "max_deliveries": 10},
                        beat={"outbox_reconcile_interval_s": 5, "outbox_republish_after_s": 5})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    beat = subprocess.Popen([sys.executable, "-m", "orchmem.worker", "beat"],
                            env=settings_env(settings), stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)
    orchestrators = ["crash-a", "crash-b", "crash-c"]
    texts = iter(distinct_texts(1000, seed=21))
    writes: dict[str, list[tuple[str, str]]] = {o: [] for o in orchestrators}
    supersedes: dict[str, list[tuple[str, str]]] = {o: [] for o in orchestrators}
    plan = []
    for i in range(1000):
        orch = orchestrators[i % 3]
        if i % 10 == 9 and writes[orch]:
            key, _ = writes[orch][-1]
            target = derive_id("m", orch, key, 0)
            skey = f"s-{i}"
            supersedes[orch].append((skey, target))
            plan.append((EDIT, orch, "edit", {"op": "supersede", "memoryId": target,
                                              "content": f"revision {i}: {next(texts)}",
                                              "idempotencyKey": skey}))
        else:
            key, text = f"w-{i}", next(texts)
            writes[orch].append((key, text))
            plan.append((WRITEBACK, orch, "wb", {"memories": [fact(text)],
                                                 "idempotencyKey": key}))
    stop = threading.Event()
    kills = []

    def killer() -> None:
        rng = random.Random(5)
        nonlocal worker
        while len(kills) < 5 and not stop.is_set():
            time.sleep(rng.uniform(1.0, 3.0))
            worker.kill()
            kills.append(time.monotonic())
            time.sleep(rng.uniform(0.2, 1.0))
            worker = WorkerProcess(settings).start(app)

    thread = threading.Thread(target=killer)
    thread.start()
    for task, orch, kind, payload in plan:
        publish(app, task, orch, kind, payload)
        time.sleep(0.005)
    thread.join(timeout=120)
    stop.set()
    assert len(kills) >= 5
    paths = {o: settings.runtime_root(o) / "memory" / "memory.db" for o in orchestrators}

    def all_done() -> bool:
        return all(receipt(paths[o], key) is not None and receipt(paths[o], key)[0] == "done"
                   for o in orchestrators for key, _ in writes[o] + supersedes[o])

    def missing() -> str:
        """What is not done yet, for the failure message: key and receipt per task."""
        left = [(o, key, receipt(paths[o], key)) for o in orchestrators
                for key, _ in writes[o] + supersedes[o]
                if (receipt(paths[o], key) or ("",))[0] != "done"]
        return f"{len(left)} not done, e.g. {left[:5]}; unacked {unacked(app)}; " \
               f"worker log: {worker.log()[-1500:]}"

    try:
        try:
            wait_until(all_done, timeout=150, interval=0.5, message="every task applied")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {missing()}") from None
        wait_until(lambda: unacked(app) == 0, timeout=30, message="no message left unacked")
    finally:
        worker.stop()
        beat.terminate()
        beat.wait(10)
    for orch in orchestrators:
        conn = sqlite3.connect(paths[orch])
        rows = conn.execute("SELECT memory_id, content, status FROM memories").fetchall()
        contents = [r[1] for r in rows]
        assert len(contents) == len(set(contents)), "a write was applied twice"
        by_id = {r[0]: r for r in rows}
        for key, text in writes[orch]:
            memory_id = derive_id("m", orch, key, 0)
            assert by_id[memory_id][1] == text, "a write was lost"
        assert len(rows) == len(writes[orch]) + len(supersedes[orch])
        for _, target in supersedes[orch]:
            assert by_id[target][2] == "superseded", "a supersede was not applied"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()


def test_a_task_running_past_the_visibility_timeout_applies_once(isolated: Any) -> None:
    settings = isolated(shards=1, worker={"visibility_timeout_s": 1},
                        memory={"writeback": {"max_memories_per_task": 3000}})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        memories = [fact(t) for t in distinct_texts(2500, seed=3)]  # several seconds of work
        key, result = publish(app, WRITEBACK, "overrun", "wb", {"memories": memories})
        assert result.get(timeout=120)["ok"]
        log = settings.runtime_root("overrun") / "memory" / "logs" / "memory.log"
        wait_until(lambda: any(r["event"] == "duplicate_delivery_skipped" and r["key"] == key
                               for r in read_log(log)), 60, message="the second delivery")
        odb = Databases(settings).open("overrun")
        with odb.bound():
            assert odb.db.execute_sql("SELECT count(*) FROM memories").fetchone()[0] == 2500
        assert receipt(odb.workspace.db_path, key)[0] == "done"
    finally:
        worker.stop()


def test_a_task_that_kills_its_worker_every_time_is_dead_lettered_after_3(
        isolated: Any) -> None:
    settings = isolated(shards=1, worker={"visibility_timeout_s": 30})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        publish(app, WRITEBACK, "poisoned", "wb", {"memories": [fact("warm")]})[1].get(90)
        poison_key, _ = publish(app, WRITEBACK, "poisoned", "wb", {
            "memories": [fact(t) for t in distinct_texts(300, seed=8)]})
        # The bystanders are published meanwhile, so the loop below watches the poisoned
        # task from its first delivery on (it may well finish within 100 publishes).
        others: list[Any] = []
        publisher = threading.Thread(target=lambda: others.extend(
            publish(app, WRITEBACK, "bystander", "wb", {"memories": [fact(t)]})[1]
            for t in distinct_texts(100, seed=9)))
        publisher.start()
        db_path = settings.runtime_root("poisoned") / "memory" / "memory.db"
        killed = 0
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            state = receipt(db_path, poison_key)
            if state is not None and state[0] == "dead":
                break
            # Each delivery that runs the task crashes the worker; the 4th is parked
            # before the task runs, so there is nothing to kill then.
            if state is not None and state[0] == "started" and killed < state[1] <= 3:
                for pid in worker.pool_children():
                    os.kill(pid, signal.SIGKILL)  # the task "kills its worker"
                killed = state[1]
            time.sleep(0.005)
        publisher.join()
        assert receipt(db_path, poison_key) == ("dead", 4)
        assert killed == 3
        assert all(r.get(timeout=120)["ok"] for r in others)
        odb = Databases(settings).open("poisoned")
        [letter] = dead_letters(odb)
        assert letter["key"] == poison_key and letter["deliveries"] == 4
        # An operator retries it (no more crashes): it runs once.
        _, retry = publish(app, DEADLETTER_RETRY, "poisoned", "dlretry",
                           {"idempotencyKey": "retry-1", "key": poison_key})
        assert retry.get(timeout=60)["retried"] == poison_key
        wait_until(lambda: receipt(db_path, poison_key) == ("done", 1), 120,
                   message="the retried task")
        assert dead_letters(odb) == []
    finally:
        worker.stop()


#: The line MemoryTask.guarded logs per task, under Celery's worker log format, whose
#: processName is the pool child's (billiard numbers each child it forks anew).
_TASK_LINE = re.compile(r"INFO/(ForkPoolWorker-\d+)\] task=\S+ orchestrator=\S+ "
                        r"outcome=(\S+) duration_ms=\S+ id=(\S+)")


def test_children_recycled_after_each_task_never_reuse_a_connection(isolated: Any) -> None:
    settings = isolated(shards=1, worker={"max_tasks_per_child": 2})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    pids: set[int] = set()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            pids.update(worker.pool_children())
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        results = [publish(app, WRITEBACK, "recycled", "wb", {"memories": [fact(t)]})[1]
                   for t in distinct_texts(6, seed=2)]
        values = [r.get(timeout=240) for r in results]
    finally:
        stop.set()
        sampler.join()
        worker.stop()
    assert all(v["ok"] and not v["duplicate"] for v in values)
    assert len(pids) >= 3, f"pool children seen: {sorted(pids)}"
    assert worker.log_path is not None
    log = worker.log_path.read_text(errors="replace")
    ran_in = {task_id: (child, outcome) for child, outcome, task_id in _TASK_LINE.findall(log)}
    assert set(ran_in) >= {r.id for r in results}
    assert all(ran_in[r.id][1] == "ok" for r in results)
    per_child = Counter(ran_in[r.id][0] for r in results)
    # Six tasks, at most two per child: at least three children ran them, each using the
    # database its parent never opened, and none a connection from before its fork.
    assert len(per_child) >= 3 and max(per_child.values()) <= 2, per_child
    assert "must not cross fork" not in log and "Traceback" not in log
    odb = Databases(settings).open("recycled")
    assert odb is not None
    with odb.bound():
        assert odb.db.execute_sql("SELECT count(*) FROM memories").fetchone()[0] == 6
    assert odb.sql("PRAGMA integrity_check")[0][0] == "ok"


def test_replaying_writes_and_ingests_after_a_restart_changes_nothing(isolated: Any) -> None:
    settings = isolated(shards=1, memory={"ingest": {"min_file_age_s": 0}})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    folder = settings.runtime_root("replayed") / "memory" / "ingest"
    folder.mkdir(parents=True)
    write = {"memories": [fact("The gate code is 2468")], "idempotencyKey": "replay-w"}
    scan = {"idempotencyKey": "replay-scan"}
    try:
        first = publish(app, WRITEBACK, "replayed", "wb", write)[1].get(60)
        (folder / "notes.md").write_text("## Decisions\n- Replays change nothing\n")
        publish(app, INGEST_SCAN, "replayed", "ingest", scan)[1].get(60)
    finally:
        worker.stop()
    worker = WorkerProcess(settings).start(app)
    try:
        (folder / "notes.md").write_text("## Decisions\n- Replays change nothing\n")
        again = publish(app, WRITEBACK, "replayed", "wb", write)[1].get(60)
        rescan = publish(app, INGEST_SCAN, "replayed", "ingest",
                         {"idempotencyKey": "replay-scan-2"})[1].get(60)
        assert again["duplicate"] and again["memoryIds"] == first["memoryIds"]
        assert rescan["duplicate"] == 1 and rescan["ingested"] == 0
        odb = Databases(settings).open("replayed")
        with odb.bound():
            assert odb.db.execute_sql("SELECT count(*) FROM memories").fetchone()[0] == 2
    finally:
        worker.stop()
