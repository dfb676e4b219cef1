"""Run by test_writer_crash.py in a fresh process (no threads, so fork is clean).

Forks a writer that commits write-back transactions in a loop and reports each
committed key through a pipe, SIGKILLs it at a random moment, checks the database, and
repeats. Prints one JSON report.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import sys
import time
from pathlib import Path

# Imported before any fork, so a child starts writing at once.
from orchmem.config import load_settings
from orchmem.models.database import Databases
from orchmem.models.schema import EdgeInput, MemoryInput, validate
from orchmem.models.writeback import write_memories


def writer(root: str, start: int, out: int) -> None:
    odb = Databases(load_settings(environ={}, root=root, broker_url="")).open("crash-loop")
    assert odb is not None
    n = start
    while True:
        key = f"k-{n}"
        memories = [validate(MemoryInput, {
            "type": "Fact", "key": f"m{i}", "content": f"fact {n}.{i} {os.urandom(6).hex()}",
            "source": {"sourceType": "manual", "capturedBy": "user"}}) for i in range(12)]
        edges = [validate(EdgeInput, {"fromMemoryId": f"m{i}", "toMemoryId": f"m{i + 1}",
                                      "edgeType": "RelatedTo"}) for i in range(11)]
        write_memories(odb, key=key, task="crash-loop", memories=memories, edges=edges)
        os.write(out, f"{key}\n".encode())
        n += 1


def check(db: Path, committed: list[str]) -> list[str]:
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
        if memories != 12 * len(done):
            problems.append(f"{memories} memories for {len(done)} receipts (partial write)")
        orphans = conn.execute("SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 "
                               "FROM memory_sources s WHERE s.memory_id = m.memory_id)"
                               ).fetchone()[0]
        indexed = conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()[0]
        edges = conn.execute("SELECT count(*) FROM memory_edges").fetchone()[0]
        if orphans or indexed != memories or edges != 11 * len(done):
            problems.append(f"partial: {orphans} without provenance, {indexed} indexed of "
                            f"{memories}, {edges} edges")
    finally:
        conn.close()
    return problems


def main() -> None:
    root, kills = sys.argv[1], int(sys.argv[2])
    rng = random.Random(11)
    committed: list[str] = []
    problems: list[str] = []
    mid_transaction = 0
    db = Path(root) / "orchestrators" / "crash-loop" / "memory" / "memory.db"
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
        time.sleep(rng.uniform(0.02, 0.12))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        with os.fdopen(read) as fh:
            keys = fh.read().split()
        committed.extend(keys)
        wal = db.with_name("memory.db-wal")
        mid_transaction += wal.exists() and wal.stat().st_size > 0
        found = check(db, committed)
        if found:
            problems.extend(found)
            break
    print(json.dumps({"kills": kills, "committed": len(committed), "problems": problems,
                      "walNonEmptyAtKill": mid_transaction}))


if __name__ == "__main__":
    main()
