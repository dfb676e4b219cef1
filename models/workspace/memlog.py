"""Per-orchestrator ``memory.log``: one JSON object per line, rotated by size.

Several processes append to the same file (the worker that writes, the orchestrator
that recalls and is denied), so every line is one ``O_APPEND`` write, and rotation is
done under an ``flock`` on a sibling lock file.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.workspace.private import FILE_MODE, open_private, private_dir

logger = logging.getLogger(__name__)


class MemoryLog:
    """Appends events to one orchestrator's memory.log.

    Each line holds ``at``, ``event``, ``orchestratorId`` and the fields given. Never
    raises: a log that cannot be written is reported on the process logger instead.
    """

    def __init__(self, path: Path, orchestrator_id: str, max_bytes: int, backups: int) -> None:
        self.path = path
        self.orchestrator_id = orchestrator_id
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        record = {"at": format_ts(utc_now()), "event": event,
                  "orchestratorId": self.orchestrator_id, **fields}
        line = (json.dumps(record, default=str, ensure_ascii=False) + "\n").encode()
        try:
            with self._lock:
                fd = self._open()
                try:
                    os.write(fd, line)
                    size = os.fstat(fd).st_size
                finally:
                    os.close(fd)
                if self.max_bytes and size > self.max_bytes:
                    self._rotate()
        except OSError as exc:
            logger.warning("cannot write %s (%s): %s", self.path, exc, line.decode().strip())

    def _open(self) -> int:
        """The log for appending; its folder is made only when missing (a mkdir on every
        line was 3 % of a batch worker's CPU)."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            return os.open(self.path, flags, FILE_MODE)
        except FileNotFoundError:
            private_dir(self.path.parent)
            return os.open(self.path, flags, FILE_MODE)

    def _rotate(self) -> None:
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open_private(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not self.path.exists() or self.path.stat().st_size <= self.max_bytes:
                    return  # another process rotated it first
                if self.backups == 0:
                    self.path.unlink()
                    return
                for n in range(self.backups - 1, 0, -1):
                    older = self.path.with_name(f"{self.path.name}.{n}")
                    if older.exists():
                        older.replace(self.path.with_name(f"{self.path.name}.{n + 1}"))
                self.path.replace(self.path.with_name(f"{self.path.name}.1"))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def read_log(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The records of a memory.log (newest last), skipping lines that are not JSON."""
    if not path.exists():
        return []
    records = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records[-limit:] if limit else records
