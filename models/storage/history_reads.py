"""A memory's history as values: its node, the audit events naming it, edges and sources."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..schema import MemoryEdge, MemoryNode
from .database import OrchestratorDB
from .edges import edges_touching, row_to_edge
from .events import naming
from .memories import row_to_node
from .provenance import CapturedSource, sources_of
from .tables import MemoryEventRow, MemoryRow
from .validity_columns import memory_fields


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


def memory_history(odb: OrchestratorDB, memory_id: str) -> MemoryHistory | None:
    """The history of ``memory_id`` read in one snapshot (events oldest first), or None
    when no such memory exists. Raises StorageError / MemoryCorrupt on a bad file."""
    with odb.read():
        row = (MemoryRow.select(*memory_fields())
               .where(MemoryRow.memory_id == memory_id).first())
        if row is None:
            return None
        events = [Event(id=e.id, op=e.op, at=e.at, actor=e.actor,
                        memory_ids=json.loads(e.memory_ids),
                        before=json.loads(e.before) if e.before else None,
                        after=json.loads(e.after) if e.after else None,
                        reason=e.reason, idempotency_key=e.idempotency_key)
                  for e in MemoryEventRow.select()
                  .where(naming(memory_id))
                  .order_by(MemoryEventRow.id)]
        return MemoryHistory(
            node=row_to_node(row, odb.orchestrator_id), forgotten=bool(row.forgotten),
            reinforcements=row.reinforcements, subject=row.subject, events=events,
            edges=[row_to_edge(e) for e in edges_touching([memory_id])],
            sources=sources_of(odb, [memory_id]))
