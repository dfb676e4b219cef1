"""Typed edges between two memories of one orchestrator."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from orchmem.config import MemoryNotFound
from orchmem.models.core.shapes import (
    EdgeInput,
    EdgeType,
    MemoryEdge,
    check_memory_id,
    derive_id,
    format_ts,
    utc_now,
)
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.db.statements import run
from orchmem.models.storage.memories.events import add_event
from orchmem.models.storage.memories.rows import exists
from orchmem.models.storage.reflection.insights import CONFLICT, open_insight
from orchmem.models.storage.schema.tables import (
    MemoryEdgeRow,
)

logger = logging.getLogger(__name__)

_INSERT_EDGE = ("INSERT OR IGNORE INTO memory_edges (edge_id, from_memory_id, to_memory_id, "
                "edge_type, weight, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")


def insert_edge(odb: OrchestratorDB, edge: EdgeInput, *, from_id: str, to_id: str, key: str | None,
                actor: str) -> str:
    """Create (or keep) an edge between two memories of this orchestrator."""
    for end in (from_id, to_id):
        check_memory_id(end, odb.orchestrator_id, where="edge")
        if not exists(end):
            raise MemoryNotFound(f"edge end {end} is not a memory of {odb.orchestrator_id!r}")
    edge_id = derive_id("e", odb.orchestrator_id, from_id, to_id, edge.edge_type.value)
    # Fixed text (.statements): a supersede links on every write-back that restates.
    inserted = run(_INSERT_EDGE, (edge_id, from_id, to_id, edge.edge_type.value, edge.weight,
                                  edge.reason, format_ts(utc_now()))).rowcount
    # The row count, not SQLite's last row id: an ignored insert must add no audit row.
    if inserted:
        add_event("link", [from_id, to_id],
                  after={"edgeId": edge_id, "edgeType": edge.edge_type.value,
                         "weight": edge.weight},
                  reason=edge.reason, actor=actor, key=key)
        if edge.edge_type == EdgeType.CONTRADICTS:
            open_insight(CONFLICT, edge_id, (from_id, to_id), edge.reason)
    return edge_id


def row_to_edge(row: MemoryEdgeRow) -> MemoryEdge:
    return MemoryEdge.model_construct(
        edge_id=row.edge_id,
        from_memory_id=row.from_memory_id,  # type: ignore[attr-defined]
        to_memory_id=row.to_memory_id,  # type: ignore[attr-defined]
        edge_type=EdgeType(row.edge_type),
        weight=row.weight,
        reason=row.reason,
        created_at=row.created_at,
    )


def edges_touching(memory_ids: Sequence[str]) -> list[MemoryEdgeRow]:
    """Edges with at least one end in ``memory_ids`` (inside a bound block)."""
    if not memory_ids:
        return []
    ids = list(memory_ids)
    return list(MemoryEdgeRow.select()
                .where(MemoryEdgeRow.from_memory.in_(ids) | MemoryEdgeRow.to_memory.in_(ids))
                .order_by(MemoryEdgeRow.edge_id))
