"""The ingest manifest (``ingest_manifest``): one row per file the ingest scan finished.

A row holds the file's name, sha256, size, outcome (``ingested``, ``duplicate`` or
``rejected``), its memoryIds and, for a rejection, the reason. ``moved`` is 0 until the
file left the ingest folder: a committed row with ``moved = 0`` is a move still to
finish, which the next scan does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.schema.tables import IngestManifestRow


@dataclass(frozen=True)
class ManifestEntry:
    """One manifest row, as plain values."""

    id: int
    file_name: str
    sha256: str
    outcome: str
    memory_ids: list[str]
    moved: bool


def add_entry(file_name: str, sha256: str, size: int, outcome: str, memory_ids: Sequence[str],
              reason: str | None = None, detail: str | None = None) -> int:
    """Append a row, not yet moved; call inside a write transaction. Returns its id."""
    row = IngestManifestRow.create(
        file_name=file_name, sha256=sha256, size=size, outcome=outcome,
        memory_ids=json.dumps(list(memory_ids)), reason=reason, detail=detail,
        at=format_ts(utc_now()))
    return int(row.id)


def record_outcome(odb: OrchestratorDB, file_name: str, sha256: str, size: int, outcome: str,
                   memory_ids: Sequence[str], reason: str | None = None,
                   detail: str | None = None) -> int:
    """:func:`add_entry` in a write transaction of its own; returns the row's id."""
    with odb.write():
        return add_entry(file_name, sha256, size, outcome, memory_ids, reason, detail)


def latest_ingested(odb: OrchestratorDB, sha256: str) -> ManifestEntry | None:
    """The newest ``ingested`` row for this content, or None when it was never ingested."""
    with odb.read():
        row = (IngestManifestRow.select()
               .where(IngestManifestRow.sha256 == sha256,
                      IngestManifestRow.outcome == "ingested")
               .order_by(IngestManifestRow.id.desc()).first())
        if row is None:
            return None
        return ManifestEntry(id=int(row.id), file_name=row.file_name, sha256=row.sha256,
                             outcome=row.outcome, memory_ids=json.loads(row.memory_ids),
                             moved=bool(row.moved))


def pending_moves(odb: OrchestratorDB) -> list[tuple[int, str]]:
    """``(row id, file name)`` of every row whose file is not marked moved yet."""
    with odb.read():
        return [(int(r.id), r.file_name) for r in IngestManifestRow.select(
            IngestManifestRow.id, IngestManifestRow.file_name).where(
            IngestManifestRow.moved == 0)]


def mark_moved(odb: OrchestratorDB, row_ids: Sequence[int]) -> None:
    """Mark these rows' files as moved out of the ingest folder (one write transaction)."""
    with odb.write():
        IngestManifestRow.update(moved=1).where(IngestManifestRow.id.in_(list(row_ids))).execute()


def hashes_of(memory_id: str) -> dict[str, int]:
    """``{sha256: size}`` of every file the ingest manifest says gave ``memory_id``
    (ingested, or a duplicate of such a file); call inside a transaction."""
    # memory_ids is a JSON list of ids; the quoted id cannot match inside another id.
    return {row.sha256: int(row.size) for row in IngestManifestRow.select(
        IngestManifestRow.sha256, IngestManifestRow.size).where(
        IngestManifestRow.memory_ids.contains(f'"{memory_id}"'),
        IngestManifestRow.outcome != "rejected")}


def recent_entries(odb: OrchestratorDB, limit: int = 100) -> list[dict[str, Any]]:
    """The newest ``limit`` manifest rows as JSON (the console's ingest page): file,
    outcome, reason code and detail of a rejection, memoryIds, size, time."""
    with odb.read():
        rows = (IngestManifestRow.select().order_by(IngestManifestRow.id.desc()).limit(limit))
        return [{"file": r.file_name, "outcome": r.outcome, "reason": r.reason,
                 "detail": r.detail, "memoryIds": json.loads(r.memory_ids), "size": r.size,
                 "at": r.at, "moved": bool(r.moved)} for r in rows]
