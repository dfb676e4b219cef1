"""A memory's history as values: its node, the audit events naming it, edges and sources."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from peewee import SQL

from orchmem.models.core.shapes import MemoryEdge, MemoryNode
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.edges import edges_touching, row_to_edge
from orchmem.models.storage.memories.events import naming
from orchmem.models.storage.memories.provenance import CapturedSource, sources_of
from orchmem.models.storage.memories.rows import row_to_node
from orchmem.models.storage.memories.validity_columns import memory_fields
from orchmem.models.storage.schema.tables import MemoryEventRow, MemoryRow
from orchmem.models.storage.search.reads import passing
from orchmem.models.storage.visibility import ALL_STATUSES, View, mentioned


@dataclass(frozen=True)
class Event:
    """One ``memory_events`` row, its JSON columns decoded."""

    id: int
    op: str
    at: str
    actor: str
    memory_ids: list[str]
    before: Any
    after: Any
    reason: str | None
    idempotency_key: str | None


@dataclass(frozen=True)
class MemoryHistory:
    """A memory (forgotten ones included: their tombstone stays) and what touched it."""

    node: MemoryNode
    forgotten: bool
    reinforcements: int
    subject: str | None
    events: list[Event]
    edges: list[MemoryEdge]
    sources: list[CapturedSource]


def memory_history(odb: OrchestratorDB, memory_id: str, view: View) -> MemoryHistory | None:
    """The history of ``memory_id`` read in one snapshot (events oldest first), or None
    when no such memory exists or ``view`` does not see it (a forgotten one's tombstone
    is seen by the views that saw it). Edges whose other end the view does not see are
    left out; an event that also names such a memory keeps its op, time and actor but
    neither that memory's id nor its before, after or reason. Raises StorageError /
    MemoryCorrupt on a bad file."""
    condition, params = view.sql()
    with odb.read():
        row = (MemoryRow.select(*memory_fields())
               .where(MemoryRow.memory_id == memory_id, SQL(condition, params)).first())
        if row is None:
            return None
        rows = list(MemoryEventRow.select().where(naming(memory_id))
                    .order_by(MemoryEventRow.id))
        edges = [row_to_edge(e) for e in edges_touching([memory_id])]
        named = {m for e in rows for m in _named(e)}
        others = {end for e in edges for end in (e.from_memory_id, e.to_memory_id)}
        shown = passing(odb, sorted((named | others) - {memory_id}), ALL_STATUSES, None,
                        view) | {memory_id}
        return MemoryHistory(
            node=row_to_node(row, odb.orchestrator_id), forgotten=bool(row.forgotten),
            reinforcements=row.reinforcements, subject=row.subject,
            events=[_event(e, shown) for e in rows],
            edges=[e for e in edges if e.from_memory_id in shown and e.to_memory_id in shown],
            sources=sources_of(odb, [memory_id]))


def _named(row: MemoryEventRow) -> set[str]:
    """Every memory an event names: its memoryIds, and those in its before and after."""
    return {*json.loads(row.memory_ids), *mentioned(row.before, row.after)}


def _event(row: MemoryEventRow, shown: set[str]) -> Event:
    """One event as the reader may see it: the memories it names (in its ids, before or
    after) that the reader does not see are left out, and with them its before, after
    and reason."""
    ids = json.loads(row.memory_ids)
    kept = [m for m in ids if m in shown]
    whole = _named(row) <= shown
    return Event(id=row.id, op=row.op, at=row.at, actor=row.actor, memory_ids=kept,
                 before=json.loads(row.before) if whole and row.before else None,
                 after=json.loads(row.after) if whole and row.after else None,
                 reason=row.reason if whole else None, idempotency_key=row.idempotency_key)
