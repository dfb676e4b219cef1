"""A worker SIGKILLed while it holds an unacknowledged write-back: nothing lost, nothing twice."""

from __future__ import annotations

import sqlite3

from orchmem.models.database import Databases
from orchmem.models.store import stats
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.app import create_app
from orchmem.worker.publish import publish
from orchmem_testing import WorkerProcess, distinct_texts, wait_until

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
