"""Control work gets through a busy shard; a bulletin nobody waits for is not built.

A backlog of write-backs is queued before the worker starts. Control tasks (here an
integrity check, as beat's fan-out would publish it) go to the shard's control queue,
which the worker reads first: the check must finish while most of the backlog is
still waiting. A bulletin request whose caller stopped waiting expires in the queue.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from orchmem_testing import WorkerProcess, distinct_texts

from orchmem.tasks.bulletin import BULLETIN
from orchmem.tasks.maintenance import INTEGRITY
from orchmem.tasks.publish import envelope, send_envelope
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
BACKLOG = 150


def _finished_writes(db: Any) -> int:
    conn = sqlite3.connect(db, timeout=10)
    try:
        return int(conn.execute("SELECT count(*) FROM task_receipts WHERE task = ? AND "
                                "status = 'done'", (WRITEBACK,)).fetchone()[0])
    finally:
        conn.close()


def test_an_integrity_check_passes_a_backlog_of_write_backs(isolated: Any) -> None:
    settings = isolated(shards=1)
    app = create_app(settings)
    results = [publish(app, WRITEBACK, "busy", "wb", {"memories": [
        {"type": "Fact", "content": text, "source": MANUAL}]})[1]
        for text in distinct_texts(BACKLOG, seed=5)]
    check = send_envelope(app, envelope("busy", INTEGRITY, "integrity",
                                        {"idempotencyKey": "integrity-now"}))
    worker = WorkerProcess(settings).start(app)
    try:
        assert check.get(timeout=120)["status"] == "ok"
        db = settings.runtime_root("busy") / "memory" / "memory.db"
        ahead = _finished_writes(db)
        for result in results:
            assert result.get(timeout=300)["ok"]
    finally:
        worker.stop()
    # Behind the backlog (one FIFO queue) all 150 would have finished first.
    assert ahead < BACKLOG // 2, f"{ahead} of {BACKLOG} write-backs ran before the check"


def test_a_bulletin_request_expires_when_its_caller_stops_waiting(isolated: Any) -> None:
    settings = isolated(shards=1)
    app = create_app(settings)
    publish(app, WRITEBACK, "quiet", "wb", {"memories": [
        {"type": "Goal", "content": "Ship the release notes", "source": MANUAL}]})
    late = send_envelope(app, envelope("quiet", BULLETIN, "bulletin",
                                       {"idempotencyKey": "bulletin-late"}), expires_s=0.5)
    time.sleep(1.0)  # the caller gave up: nobody reads this bulletin any more
    fresh = send_envelope(app, envelope("quiet", BULLETIN, "bulletin",
                                        {"idempotencyKey": "bulletin-fresh"}), expires_s=120)
    worker = WorkerProcess(settings).start(app)
    try:
        assert fresh.get(timeout=120)["ok"]
        assert late.state == "REVOKED"
    finally:
        worker.stop()
