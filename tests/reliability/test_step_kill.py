"""A step's log events and its write-back are one transaction: a process
SIGKILLed inside it, after the events were inserted and before the commit, leaves
neither the memory nor the events; the step run again writes both, once."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from orchmem.models.execlog.rules import new_run_id

HELPER = Path(__file__).with_name("step_kill_helper.py")
ORCH = "step-kill"


def step(root: Path, run_id: str, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HELPER), str(root), run_id, mode],
                          capture_output=True, text=True, timeout=300)


def counts(root: Path, run_id: str) -> tuple[int, list[str], int]:
    """(memories, kinds of the run's logged events, receipts done)."""
    db = root / "orchestrators" / ORCH / "memory" / "memory.db"
    conn = sqlite3.connect(db)
    try:
        memories = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        kinds = [r[0] for r in conn.execute(
            "SELECT kind FROM log_events WHERE run_id = ? ORDER BY seq", (run_id,))]
        done = conn.execute("SELECT count(*) FROM task_receipts WHERE status = 'done' "
                            "AND task = 'orchmem.writeback'").fetchone()[0]
    finally:
        conn.close()
    return memories, kinds, done


def test_a_kill_inside_a_steps_transaction_leaves_neither_its_memory_nor_its_events(
        tmp_path: Path) -> None:
    run_id = new_run_id(ORCH)
    killed = step(tmp_path, run_id, "kill")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert "written" not in killed.stdout
    assert counts(tmp_path, run_id) == (0, [], 0)

    again = step(tmp_path, run_id, "run")
    assert again.returncode == 0, again.stderr[-2000:]
    # the memory's snapshot on the tape is written in the same transaction as the memory
    assert counts(tmp_path, run_id) == (
        1, ["step_start", "prompt", "memory_stored", "step_end"], 1)
