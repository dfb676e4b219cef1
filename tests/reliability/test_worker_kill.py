"""A worker SIGKILLed while it holds an unacknowledged write-back: nothing lost, nothing twice."""

from __future__ import annotations

import sqlite3

from orchmem_testing import WorkerProcess, distinct_texts, wait_until

from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.db.stats import stats
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def receipt(db_path, key):  # type: ignore[no-untyped-def]
    if not db_path.exists():
        return None
    conn = sqlite3.connect(db_path, timeout=5)
    try:
        return conn.execute("SELECT status, deliveries FROM task_receipts WHERE key = ?",
                            (key,)).fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()


def test_sigkill_while_holding_a_task_runs_it_exactly_once_after_restart(isolated) -> None:  # type: ignore[no-untyped-def]
    settings = isolated(shards=1, worker={"visibility_timeout_s": 3})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    orch = "killed-mid-task"
    # Warm the worker (model loaded, database created) so the kill lands mid-task.
    publish(app, WRITEBACK, orch, "wb", {"memories": [{"type": "Fact", "content": "warm",
                                                        "source": MANUAL}]})[1].get(timeout=90)
    memories = [{"type": "Fact", "content": text, "source": MANUAL}
                for text in distinct_texts(400)]
    key, result = publish(app, WRITEBACK, orch, "wb", {"memories": memories})
    db_path = settings.runtime_root(orch) / "memory" / "memory.db"
    wait_until(lambda: receipt(db_path, key) == ("started", 1), timeout=60, interval=0.002,
               message="the worker to start the task")
    worker.kill()

    redis = app.connection_for_write().channel().client
    assert redis.hlen("unacked") == 1, "the killed worker must leave the message unacked"
    odb = Databases(settings).open(orch)
    assert stats(odb)["memories"] == 1, "nothing of the killed task may be committed"

    restarted = WorkerProcess(settings).start(app)
    try:
        value = result.get(timeout=90)
        assert value["ok"] and len(value["created"]) == 400
        assert receipt(db_path, key) == ("done", 2)
        assert stats(odb)["memories"] == 401
        wait_until(lambda: redis.hlen("unacked") == 0, timeout=10, message="ack")
        with odb.bound():
            assert odb.db.execute_sql("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        restarted.stop()


def test_sigkill_during_an_ingest_scan_ingests_each_file_once_after_restart(isolated) -> None:  # type: ignore[no-untyped-def]
    from orchmem.models.storage.memories.rows import list_memories
    from orchmem.tasks.ingest import INGEST_SCAN

    settings = isolated(shards=1, worker={"visibility_timeout_s": 3},
                        memory={"ingest": {"min_file_age_s": 0}})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    orch = "killed-mid-scan"
    folder = settings.runtime_root(orch) / "memory" / "ingest"
    folder.mkdir(parents=True)
    publish(app, WRITEBACK, orch, "wb", {"memories": [{"type": "Fact", "content": "warm",
                                                        "source": MANUAL}]})[1].get(timeout=90)
    texts = distinct_texts(600, seed=9)
    for n in range(3):
        body = "\n\n".join(f"- {t}" for t in texts[n * 200:(n + 1) * 200])
        (folder / f"part-{n}.md").write_text("## Notes\n" + body + "\n")
    key, result = publish(app, INGEST_SCAN, orch, "ingest", {"idempotencyKey": "scan-kill"})
    db_path = settings.runtime_root(orch) / "memory" / "memory.db"
    wait_until(lambda: receipt(db_path, key) == ("started", 1), timeout=60, interval=0.002,
               message="the scan to start")
    worker.kill()
    restarted = WorkerProcess(settings).start(app)
    try:
        value = result.get(timeout=120)
        assert value["ok"]
        odb = Databases(settings).open(orch)
        contents = [n.content for n in list_memories(odb, limit=10_000)]
        assert sorted(contents) == sorted([*texts, "warm"])
        assert sorted(p.name for p in (folder / "processed").iterdir()) == [
            "part-0.md", "part-1.md", "part-2.md"]
        assert [p.name for p in folder.iterdir() if p.is_file()] == []
    finally:
        restarted.stop()
