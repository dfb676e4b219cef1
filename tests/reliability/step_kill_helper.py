"""Run by test_step_kill.py in a fresh process: one step of a run that logs its prompt
and writes a memory back, in the client's in-process mode (the real task code and
file). With ``kill``, the process SIGKILLs itself inside the transaction that inserted
both the memory and the step's log events, before its receipt and its commit."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from orchmem.config import load_settings
from orchmem.worker import MemoryClient

ORCH = "step-kill"
CONTENT = "The release train leaves on Thursdays"


def main() -> None:
    root, run_id, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    memory = MemoryClient(ORCH, load_settings(environ={}, root=root, broker_url=""),
                          immediate=True)
    odb = memory.databases.open(ORCH)
    assert odb is not None
    seen: set[str] = set()  # what the open transaction wrote so far

    def trace(statement: str) -> None:
        if statement.startswith("BEGIN"):
            seen.clear()
        elif statement.startswith(('INSERT INTO "memories"', "INSERT INTO memories ")):
            seen.add("memory")
        elif statement.startswith("INSERT INTO log_events"):
            seen.add("log")
        elif seen == {"memory", "log"} and "task_receipts" in statement and mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)  # both written, not committed

    odb.db.connection().set_trace_callback(trace)
    run = memory.run("plan the release", run_id=run_id)
    with run.step("plan") as step:
        step.prompt("When does the release train leave?")
        done = step.write_back(memories=[{"type": "Fact", "content": CONTENT}]).wait(30)
        assert done is not None and done["ok"], done
    print("written", flush=True)


if __name__ == "__main__":
    main()
