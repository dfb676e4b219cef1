"""Is one orchestrator's memory.db sound, and what happens when it is not.

At open (:func:`verify`) and from the beat's integrity job (:func:`integrity_problem`):
the file header and WAL magic, ``PRAGMA quick_check``, the schema version and the
owner recorded in ``meta``. A damaged file is moved aside (:func:`quarantine`) with a
marker that disables that orchestrator's memory (:func:`check_not_disabled`) until an
operator removes it; every other orchestrator goes on.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from orchmem.config import MemoryCorrupt, MemoryDisabled, StorageError, check_no_case_twin
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.storage.schema.tables import (
    META_ORCHESTRATOR_ID,
    META_SCHEMA_VERSION,
    SCHEMA_VERSION,
)
from orchmem.models.workspace.folders import Workspace
from orchmem.models.workspace.private import private_dir, write_private

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

_WAL_MAGIC = (0x377F0682, 0x377F0683)
_SQLITE_HEADER = b"SQLite format 3\x00"


def check_not_disabled(workspace: Workspace) -> None:
    """Raise MemoryDisabled when a corruption marker disables this orchestrator's memory."""
    marker = workspace.disabled_marker
    if marker.exists():
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
            reason = info.get("reason", "unknown reason")
        except (OSError, ValueError):
            reason = "unreadable marker"
        raise MemoryDisabled(
            f"memory of orchestrator {workspace.orchestrator_id!r} is disabled: {reason}. "
            f"Inspect {workspace.quarantine_dir}, then delete {marker} to start again"
        )


def integrity_problem(odb: OrchestratorDB) -> str | None:
    """What is wrong with the file (header, WAL, ``quick_check``, owner), or None."""
    problem = _header_problem(odb.workspace.db_path)
    if problem is None:
        try:
            with odb.bound():
                rows = odb.db.execute_sql("PRAGMA quick_check").fetchall()
                if [r[0] for r in rows] != ["ok"]:
                    problem = "quick_check: " + "; ".join(str(r[0]) for r in rows[:5])
                else:
                    problem = _schema_problem(odb)
        except MemoryCorrupt as exc:
            problem = str(exc)
    return problem


def verify(odb: OrchestratorDB) -> None:
    """Integrity and ownership check at open; raises MemoryCorrupt or StorageError."""
    path = odb.workspace.db_path
    problem = integrity_problem(odb)
    if problem is not None:
        odb.close()
        raise MemoryCorrupt(
            f"memory.db of orchestrator {odb.orchestrator_id!r} failed its integrity check: "
            f"{problem}. Memory is disabled for this orchestrator; the file is at {path}"
        )


def _header_problem(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
        if len(header) < 100 or not header.startswith(_SQLITE_HEADER):
            return f"not a SQLite database ({len(header)}-byte header)"
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            with wal.open("rb") as fh:
                magic = int.from_bytes(fh.read(4), "big")
            if magic not in _WAL_MAGIC:
                return f"{wal.name} is not a SQLite write-ahead log"
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc}") from exc
    return None


def _schema_problem(odb: OrchestratorDB) -> str | None:
    version = odb.meta(META_SCHEMA_VERSION)
    owner = odb.meta(META_ORCHESTRATOR_ID)
    if version is None:
        return "meta has no schema_version"
    if int(version) > SCHEMA_VERSION:
        raise StorageError(
            f"memory.db of {odb.orchestrator_id!r} has schema {version}, newer than this "
            f"orchmem ({SCHEMA_VERSION}): upgrade orchmem"
        )
    if owner != odb.orchestrator_id:
        # A case-insensitive file system opened a twin's folder: refused, not damage.
        check_no_case_twin(odb.orchestrator_id, [owner] if owner else [])
        return f"it belongs to orchestrator {owner!r}"
    return None


def quarantine(workspace: Workspace, reason: str) -> Path:
    """Move a damaged memory.db (and its -wal/-shm) aside and disable the orchestrator.

    Returns the quarantine folder. The next open raises MemoryDisabled until an operator
    removes the marker.
    """
    folder = workspace.quarantine_dir / format_ts(utc_now()).replace(":", "")
    private_dir(folder)
    for suffix in ("", "-wal", "-shm"):
        src = workspace.db_path.with_name(workspace.db_path.name + suffix)
        if src.exists():
            shutil.move(str(src), folder / src.name)
    marker = {"reason": reason, "at": format_ts(utc_now()), "quarantine": str(folder)}
    tmp = workspace.disabled_marker.with_suffix(".tmp")
    write_private(tmp, json.dumps(marker, indent=2))
    tmp.replace(workspace.disabled_marker)
    return folder
