"""Backups of one orchestrator's memory.db with SQLite's online backup API, and restores.

A backup is never a copy of the live file (its WAL may hold committed pages the main
file does not have yet): the backup API reads one consistent snapshot through a
connection, so it is safe while the worker writes. Each backup is one self-contained
file (rollback journal, no -wal beside it) in ``memory/backups/``, named
``memory-<UTC time>-<reason>.db``; it is written under a ``.partial`` name and renamed
when complete, so a backup killed half-way is never mistaken for one.

A restore copies a checked backup into the live file with the same API in a single
step, which holds the live file's write lock for the whole copy: the shard's worker
(or any writer) waits on its ``busy_timeout`` and then sees the restored file, never a
mix. Readers' cached vector matrices are invalidated (``embedding_deletes`` moves on).
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from orchmem.config import MemoryCorrupt, StorageError
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.storage.schema.tables import (
    META_EMBEDDING_DELETES,
    META_ORCHESTRATOR_ID,
    META_SCHEMA_VERSION,
)
from orchmem.models.workspace.atomic import fsync_path
from orchmem.models.workspace.folders import Workspace
from orchmem.models.workspace.private import private_database, private_dir

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

_NAME = re.compile(r"^memory-(\d{8}T\d{12}Z)-([a-z0-9-]{1,40})\.db$")
#: Backups that retention removes; the others (pre-migration) stay until removed by hand.
ROTATED = frozenset({"manual", "scheduled"})


@dataclass(frozen=True)
class Backup:
    path: Path
    #: UTC time taken, as in the name (``20261124T012600123456Z``).
    taken: str
    reason: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "taken": self.taken, "reason": self.reason,
                "bytes": self.size}


def _stamp() -> str:
    return format_ts(utc_now()).replace("-", "").replace(":", "").replace(".", "")


def copy_into(source: sqlite3.Connection, path: Path) -> None:
    """The backup API from ``source`` into a new file at ``path`` (rollback journal)."""
    private_database(path)
    dest = sqlite3.connect(path)
    try:
        source.backup(dest)
        dest.execute("PRAGMA journal_mode=DELETE")
    finally:
        dest.close()


def take_backup(odb: OrchestratorDB, reason: str) -> Path:
    """Back the database up into ``memory/backups/``; returns the file. Raises StorageError."""
    if not re.fullmatch(r"[a-z0-9-]{1,40}", reason):
        raise ValueError(f"backup reason {reason!r} must be lowercase letters, digits, -")
    folder = odb.workspace.backups_dir
    path = folder / f"memory-{_stamp()}-{reason}.db"
    partial = path.with_name(f".{path.name}.partial")
    try:
        private_dir(folder)
        for stale in folder.glob(".memory-*.partial"):
            stale.unlink(missing_ok=True)  # left by a backup killed half-way
        copy_into(odb.db.connection(), partial)
        with partial.open("rb+") as fh:
            os.fsync(fh.fileno())
        partial.replace(path)
        fsync_path(folder)
    except (OSError, sqlite3.Error) as exc:
        partial.unlink(missing_ok=True)
        raise StorageError(f"cannot back up the memory of {odb.orchestrator_id!r} into "
                           f"{folder}: {exc}") from exc
    odb.log.write("backup", path=str(path), reason=reason, bytes=path.stat().st_size)
    return path


def list_backups(workspace: Workspace) -> list[Backup]:
    """The orchestrator's complete backups, oldest first."""
    found = []
    if workspace.backups_dir.is_dir():
        for entry in sorted(workspace.backups_dir.iterdir()):
            match = _NAME.match(entry.name)
            if match and entry.is_file() and not entry.is_symlink():
                found.append(Backup(entry, match[1], match[2], entry.stat().st_size))
    return sorted(found, key=lambda b: (b.taken, b.path.name))


def prune(workspace: Workspace, keep: int) -> list[Path]:
    """Delete the oldest manual and scheduled backups beyond ``keep``; returns them."""
    rotated = [b for b in list_backups(workspace) if b.reason in ROTATED]
    gone = [b.path for b in rotated[:max(len(rotated) - keep, 0)]]
    for path in gone:
        path.unlink(missing_ok=True)
    return gone


def check_backup(path: Path, orchestrator_id: str) -> int:
    """``quick_check`` and owner of a backup file; returns its schema version.

    Raises MemoryCorrupt (damaged, or another orchestrator's) or StorageError (unreadable).
    """
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open backup {path}: {exc}") from exc
    try:
        if [r[0] for r in conn.execute("PRAGMA quick_check")] != ["ok"]:
            raise MemoryCorrupt(f"backup {path} fails quick_check: it cannot be restored")
        meta = dict(conn.execute("SELECT key, value FROM meta"))
    except sqlite3.Error as exc:
        raise MemoryCorrupt(f"backup {path} is not a readable memory.db: {exc}") from exc
    finally:
        conn.close()
    if meta.get(META_ORCHESTRATOR_ID) != orchestrator_id:
        raise MemoryCorrupt(f"backup {path} belongs to orchestrator "
                            f"{meta.get(META_ORCHESTRATOR_ID)!r}, not {orchestrator_id!r}")
    return int(meta.get(META_SCHEMA_VERSION, 0))


def restore_backup(workspace: Workspace, backup: Path, busy_timeout_ms: int) -> int:
    """Copy ``backup`` over the live memory.db (created when missing) under its write lock.

    Returns the restored schema version. Raises MemoryCorrupt / StorageError; on an error
    the live file is unchanged (the copy is one step under one lock).
    """
    version = check_backup(backup, workspace.orchestrator_id)
    private_dir(workspace.memory_dir)
    private_database(workspace.db_path)
    try:
        source = sqlite3.connect(f"file:{quote(str(backup))}?mode=ro", uri=True)
        live = sqlite3.connect(workspace.db_path, timeout=busy_timeout_ms / 1000,
                               isolation_level=None)
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open {workspace.db_path} to restore it: {exc}") from exc
    try:
        live.execute("PRAGMA journal_mode=WAL")
        deletes = _deletes(live)
        source.backup(live)  # pages=-1: one step, the live write lock held throughout
        live.execute("BEGIN IMMEDIATE")
        live.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                     (META_EMBEDDING_DELETES, str(max(deletes, _deletes(live)) + 1)))
        live.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StorageError(f"restoring {workspace.db_path} from {backup} failed: {exc}") \
            from exc
    finally:
        source.close()
        live.close()
    return version


def _deletes(conn: sqlite3.Connection) -> int:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?",
                           (META_EMBEDDING_DELETES,)).fetchone()
    except sqlite3.Error:
        return 0  # a new, empty file
    return int(row[0]) if row else 0
