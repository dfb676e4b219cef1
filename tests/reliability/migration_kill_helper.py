"""Run by test_migration_kill.py in a fresh process: open a schema-1 memory as a writer
(which migrates it) and SIGKILL this process at one point of the migration.

    python migration_kill_helper.py ROOT ORCHESTRATOR POINT

POINT: ``backup`` (the backup copied, not yet renamed into place), ``step`` (inside the
transaction, the step's DDL done), ``check`` (inside the transaction, before the check),
``commit`` (committed, before the log line).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from orchmem.config import load_settings
from orchmem.models.storage.db import backup
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.schema import migrations
from orchmem.models.workspace.memlog import MemoryLog


def die(*_: Any, **__: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(root: str, orchestrator_id: str, point: str) -> None:
    if point == "backup":
        real_copy = backup.copy_into

        def copy_then_die(source: Any, path: Any) -> None:
            real_copy(source, path)
            die()

        backup.copy_into = copy_then_die  # type: ignore[assignment]
    elif point == "step":
        def step_then_die(odb: Any) -> None:
            migrations.upgrade_to_2(odb)
            die()

        migrations.MIGRATIONS = [migrations.Step(2, step_then_die, migrations.downgrade_from_2)]
    elif point == "check":
        migrations.check_migrated = die  # type: ignore[assignment]
    elif point == "commit":
        real_write = MemoryLog.write

        def write(self: MemoryLog, event: str, **fields: Any) -> None:
            if event == "schema_migrated":
                die()
            real_write(self, event, **fields)

        MemoryLog.write = write  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown point {point!r}")
    Databases(load_settings(environ={}, root=root, broker_url="")).open(orchestrator_id)
    raise SystemExit("the migration finished without reaching the kill point")


if __name__ == "__main__":
    main(*sys.argv[1:4])
