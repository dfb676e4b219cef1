"""Memory snapshots on the execution log (the tape): what ``orchmem rebuild --from-log``
replays when the memory rows are lost.

A memory written from a run's step (its source names a run of this orchestrator) gets
one ``memory_stored`` event in the write-back's transaction, in that run and step: its
``name`` is the memoryId, its ``status`` the audit operation (``create`` first), its
``data`` the snapshot: the memory's row, its sources and the edges touching it, each as
``orchmem export`` writes them (models/storage/memories/portable.py). Every later audited
change of that memory (supersede, retract, patch, reinforce, a link, a hard forget)
appends a fresh snapshot of the changed row to the same run: the last snapshot of a
memory is its state.

Snapshots are not part of a run's story: they are not counted in ``log_runs``, and the
log's readers (``orchmem log``, *what happened* answers, episodes, the archive) leave
them out; an event read by id shows the memoryId only, never the snapshot, which is read
here alone. Their idempotency keys hold spaces, which no caller's key may: a caller
cannot write one. A hard forget erases every snapshot of the memory (marked redacted,
as a redacted event is) before its tombstone snapshot is appended, takes the reasons of
its edges out of its neighbours' snapshots, and the subject another memory took from it
out of that memory's snapshots.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from orchmem.models.core.shapes import derive_id
from orchmem.models.execlog.rules import LOG_SCHEMA_VERSION
from orchmem.models.storage.db.statements import run
from orchmem.models.storage.execlog.entries import SNAPSHOT_KIND
from orchmem.models.storage.memories import portable
from orchmem.models.storage.schema.migrations import schema_version
from orchmem.models.storage.schema.tables import MemoryRow

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

KIND = SNAPSHOT_KIND
#: The first schema with the execution log's tables.
LOG_SCHEMA = 5
#: Audit operations that change no memory's row, or that log their own first snapshot.
_NOT_CHANGES = frozenset({"create", "import", "ingest", "crystallize", "rebuild_from_log"})
_INSERT = (
    "INSERT INTO log_events (event_id, idempotency_key, run_id, step_id, kind, name, "
    "status, data, replay, schema_version, task_key, at, recorded_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?) ON CONFLICT(event_id) DO NOTHING")
_SOURCE_ORDER = "t.id"


def first_key(memory_id: str) -> str:
    """The idempotency key of ``memory_id``'s first snapshot (spaces: never a caller's)."""
    return f"memory stored {memory_id}"


def _orchestrator() -> str:
    return str(MemoryRow._meta.database.orchestrator_id)


@lru_cache(maxsize=8)
def _columns(kind: str) -> tuple[list[portable.Column], str]:
    """The export columns of ``kind`` and their select list (the table classes' fields
    do not change in a process)."""
    cols = portable.columns(kind)
    return cols, ", ".join(f"t.{c.column}" for c in cols)


def _lines(kind: str, where: str, params: Sequence[Any], order: str) -> list[dict[str, Any]]:
    cols, select = _columns(kind)
    table = {"records": "memories", "sources": "memory_sources", "edges": "memory_edges"}[kind]
    rows = run(f"SELECT {select} FROM {table} AS t WHERE {where} ORDER BY {order}",
               params).fetchall()
    return [{c.key: (json.loads(v) if c.kind == "json" and v is not None else v)
             for c, v in zip(cols, row, strict=True)} for row in rows]


def snapshot(memory_id: str) -> dict[str, Any] | None:
    """The memory's row, sources and edges as export lines (inside a bound block)."""
    record = _lines("records", "t.memory_id = ?", (memory_id,), "t.memory_id")
    if not record:
        return None
    return {"memoryId": memory_id, "record": record[0],
            "sources": _lines("sources", "t.memory_id = ?", (memory_id,), _SOURCE_ORDER),
            "edges": _lines("edges", "t.from_memory_id = ? OR t.to_memory_id = ?",
                            (memory_id, memory_id), "t.edge_id")}


def log_snapshot(memory_id: str, run_id: str, step_id: str | None, key: str, op: str,
                 task_key: str, at: str) -> bool:
    """Append a snapshot of ``memory_id`` under idempotency key ``key`` (inside a write
    transaction); False when the memory is not stored or the key was used already."""
    data = snapshot(memory_id)
    if data is None:
        return False
    event_id = derive_id("e", _orchestrator(), key)
    cursor = run(_INSERT, (event_id, key, run_id, step_id, KIND, memory_id, op,
                           json.dumps(data, ensure_ascii=False, sort_keys=True),
                           LOG_SCHEMA_VERSION, task_key, at, at))
    return bool(cursor.rowcount == 1)


def first_of(memory_id: str) -> tuple[str, str | None] | None:
    """``(run_id, step_id)`` of ``memory_id``'s first snapshot, or None when it has none
    (one lookup of the eventId index; inside a bound block)."""
    if schema_version() < LOG_SCHEMA:
        return None
    event_id = derive_id("e", _orchestrator(), first_key(memory_id))
    row = run("SELECT run_id, step_id FROM log_events WHERE event_id = ?",
              (event_id,)).fetchone()
    return (str(row[0]), row[1]) if row else None


def after_audit(op: str, memory_ids: Sequence[str], audit_id: int, at: str) -> None:
    """Append a fresh snapshot of each of ``memory_ids`` that has one (the audit event
    ``audit_id``, operation ``op``, changed it; inside its write transaction)."""
    if op in _NOT_CHANGES or not memory_ids or \
            getattr(MemoryRow._meta.database, "orchestrator_id", None) is None:
        return
    for memory_id in dict.fromkeys(memory_ids):
        first = first_of(memory_id)
        if first is not None:
            log_snapshot(memory_id, first[0], first[1], f"{first_key(memory_id)} {audit_id}",
                         op, f"audit-{audit_id}", at)


def snapshot_seqs(memory_id: str) -> list[int]:
    """Seqs of every snapshot of ``memory_id`` (all are in the run of its first)."""
    first = first_of(memory_id)
    if first is None:
        return []
    return [int(r[0]) for r in run(
        "SELECT seq FROM log_events WHERE run_id = ? AND kind = ? AND name = ? ORDER BY seq",
        (first[0], KIND, memory_id)).fetchall()]


def _rewrite(memory_id: str, change: Callable[[dict[str, Any]], bool]) -> int:
    """Rewrite every snapshot of ``memory_id`` that ``change`` changes (in place; True
    when it did); returns how many."""
    changed = 0
    for seq in snapshot_seqs(memory_id):
        raw = run("SELECT data FROM log_events WHERE seq = ?", (seq,)).fetchone()[0]
        data = json.loads(raw) if raw else None
        if isinstance(data, dict) and change(data):
            run("UPDATE log_events SET data = ? WHERE seq = ?",
                (json.dumps(data, ensure_ascii=False, sort_keys=True), seq))
            changed += 1
    return changed


def drop_edge_reasons(memory_id: str, neighbours: Sequence[str]) -> int:
    """Take the reasons of the edges touching ``memory_id`` out of the snapshots of
    ``neighbours`` (a hard forget of ``memory_id``); returns the snapshots rewritten."""

    def change(data: dict[str, Any]) -> bool:
        touched = False
        for edge in data.get("edges") or []:
            if memory_id in (edge.get("fromMemoryId"), edge.get("toMemoryId")) \
                    and edge.get("reason") is not None:
                edge["reason"] = None
                touched = True
        return touched

    return sum(_rewrite(neighbour, change) for neighbour in dict.fromkeys(neighbours))


def release_subject(memory_id: str) -> int:
    """Take the subject and value out of ``memory_id``'s snapshots (a hard forget of the
    memory it took them from released them: forget.py); returns how many."""

    def change(data: dict[str, Any]) -> bool:
        record = data.get("record")
        if not isinstance(record, dict) or (record.get("subject"), record.get("value")) \
                == (None, None):
            return False
        record["subject"] = record["value"] = None
        return True

    return _rewrite(memory_id, change)


def neighbours_of(memory_id: str) -> list[str]:
    """The memories at the other end of ``memory_id``'s edges."""
    return [str(r[0]) for r in run(
        "SELECT to_memory_id FROM memory_edges WHERE from_memory_id = ? UNION "
        "SELECT from_memory_id FROM memory_edges WHERE to_memory_id = ?",
        (memory_id, memory_id)).fetchall()]


def stored_edge_ids(odb: OrchestratorDB, edge_ids: Sequence[str]) -> set[str]:
    """Those of ``edge_ids`` already stored."""
    return {str(r[0]) for r in odb.sql(
        "SELECT edge_id FROM memory_edges WHERE edge_id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(edge_ids)),))}


def count_snapshots(odb: OrchestratorDB) -> int:
    """How many snapshots the log holds."""
    return int(odb.sql("SELECT count(*) FROM log_events WHERE kind = ?", (KIND,))[0][0])


def read_snapshots(odb: OrchestratorDB, after: int, limit: int
                   ) -> list[tuple[int, str, str | None, dict[str, Any] | None]]:
    """``(seq, memoryId, op, data)`` of the snapshots after seq ``after``, in log order,
    at most ``limit`` (``data`` None when it is not an object)."""
    rows = odb.sql("SELECT seq, name, status, data FROM log_events WHERE kind = ? AND seq > ? "
                   "ORDER BY seq LIMIT ?", (KIND, after, limit))
    out = []
    for seq, name, status, raw in rows:
        data = json.loads(raw) if raw else None
        out.append((int(seq), str(name), status, data if isinstance(data, dict) else None))
    return out
