"""Run by test_writer_crash.py in a fresh process (no threads, so fork is clean).

Forks a writer that commits write-back transactions in a loop, SIGKILLs it at a random
moment, checks the database, and repeats. Prints one JSON report.

The writer announces each transaction through a pipe: ``begin <key>`` from SQLite's
trace callback at the first statement after ``BEGIN`` (the transaction is open), and
``commit <key>`` once ``write_memories`` returned (it is committed). A kill whose last
announcement is a ``begin`` whose key is not in the file afterwards landed inside an
open transaction that never committed: those are counted, and that transaction must
have left nothing behind.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

# Imported before any fork, so a child starts writing at once.
from orchmem.config import load_settings
from orchmem.models.core.shapes import EdgeInput, MemoryInput, derive_id, validate
from orchmem.models.storage.db.database import Databases
from orchmem.models.writeback.apply import write_memories

ORCH = "crash-loop"
MEMORIES, EDGES = 12, 11
#: The kill comes after the writer's n-th ``begin`` (n drawn from BEGINS, so the n - 1
#: transactions before it committed) plus a random pause of up to KILL_PAUSE_S, shorter
#: than a transaction, which is open for nearly all of the writer's loop.
BEGINS = (1, 4)
KILL_PAUSE_S = 0.03


def writer(root: str, start: int, out: int) -> None:
    odb = Databases(load_settings(environ={}, root=root, broker_url="")).open(ORCH)
    assert odb is not None
    state: dict[str, Any] = {"key": "", "armed": False}

    def trace(statement: str) -> None:
        if statement.startswith("BEGIN"):
            state["armed"] = True
        elif state["armed"]:
            state["armed"] = False
            os.write(out, f"begin {state['key']}\n".encode())

    traced = None
    n = start
    while True:
        connection = odb.db.connection()
        if connection is not traced:
            connection.set_trace_callback(trace)
            traced = connection
        key = state["key"] = f"k-{n}"
        memories = [validate(MemoryInput, {
            "type": "Fact", "key": f"m{i}", "content": f"fact {n}.{i} {os.urandom(6).hex()}",
            "source": {"sourceType": "manual", "capturedBy": "user"}}) for i in range(MEMORIES)]
        edges = [validate(EdgeInput, {"fromMemoryId": f"m{i}", "toMemoryId": f"m{i + 1}",
                                      "edgeType": "RelatedTo"}) for i in range(EDGES)]
        write_memories(odb, key=key, task="crash-loop", memories=memories, edges=edges)
        os.write(out, f"commit {key}\n".encode())
        n += 1


class Announcements:
    """The lines a writer sent through its pipe, read without blocking forever."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def lines(self) -> list[tuple[str, str]]:
        """(event, key) pairs; each line is one write of less than PIPE_BUF, so whole."""
        return [(event, key) for event, _, key in
                (line.partition(" ") for line in self.buffer.decode().splitlines())]

    def read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            chunk = os.read(self.fd, 65536)
            self.buffer += chunk
            self.closed = not chunk

    def wait_for_begins(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            if sum(event == "begin" for event, _ in self.lines()) >= count:
                return True
            self.read(0.05)
        return False

    def drain(self) -> None:
        while not self.closed:
            self.read(10)


def check(db: Path, committed: list[str], in_flight: str | None) -> tuple[list[str], set[str]]:
    """Problems found in the file, and the keys whose receipts say done."""
    problems = []
    conn = sqlite3.connect(db, timeout=30)
    try:
        if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("integrity_check failed")
        done = {r[0] for r in conn.execute("SELECT key FROM task_receipts WHERE status='done'")}
        missing = [k for k in committed if k not in done]
        if missing:
            problems.append(f"committed but missing: {missing[:5]}")
        memories = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        if memories != MEMORIES * len(done):
            problems.append(f"{memories} memories for {len(done)} receipts (partial write)")
        orphans = conn.execute("SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 "
                               "FROM memory_sources s WHERE s.memory_id = m.memory_id)"
                               ).fetchone()[0]
        indexed = conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()[0]
        edges = conn.execute("SELECT count(*) FROM memory_edges").fetchone()[0]
        if orphans or indexed != memories or edges != EDGES * len(done):
            problems.append(f"partial: {orphans} without provenance, {indexed} indexed of "
                            f"{memories}, {edges} edges")
        if in_flight is not None and in_flight not in done:
            ids = [derive_id("m", ORCH, in_flight, i) for i in range(MEMORIES)]
            visible = conn.execute(
                f"SELECT count(*) FROM memories WHERE memory_id IN ({','.join('?' * len(ids))})",
                ids).fetchone()[0]
            if visible:
                problems.append(f"{visible} memories of the killed transaction {in_flight}")
    finally:
        conn.close()
    return problems, done


def main() -> None:
    root, kills = sys.argv[1], int(sys.argv[2])
    rng = random.Random(11)
    committed: list[str] = []
    problems: list[str] = []
    counts = {"midTransaction": 0, "committedUnannounced": 0, "betweenTransactions": 0}
    db = Path(root) / "orchestrators" / ORCH / "memory" / "memory.db"
    for attempt in range(kills):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                writer(root, attempt * 100_000, write)
            finally:
                os._exit(1)
        os.close(write)
        announcements = Announcements(read)
        began = announcements.wait_for_begins(rng.randint(*BEGINS), timeout=60)
        if began:
            time.sleep(rng.uniform(0.0, KILL_PAUSE_S))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        announcements.drain()
        os.close(read)
        if not began:
            problems.append(f"attempt {attempt}: the writer never began a transaction")
            break
        events = announcements.lines()
        committed.extend(key for event, key in events if event == "commit")
        last_event, last_key = events[-1]
        in_flight = last_key if last_event == "begin" else None
        found, done = check(db, committed, in_flight)
        if in_flight is None:
            counts["betweenTransactions"] += 1
        elif in_flight in done:  # killed after COMMIT, before it was announced
            counts["committedUnannounced"] += 1
        else:
            counts["midTransaction"] += 1
        if found:
            problems.extend(found)
            break
    print(json.dumps({"kills": kills, "committed": len(committed), "problems": problems,
                      **counts}))


if __name__ == "__main__":
    main()
