"""Recall's reads: the candidate filter, what ranking needs, and the rows of a bundle.

Recall runs all of them (with ``fts.search`` and ``vectors.search``) inside one
``odb.read()``, so the searches, the filters and the assembled nodes see one snapshot:
a memory forgotten meanwhile is either whole in the answer or not in it at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..schema import MemoryEdge, MemoryNode, MemoryType, Status
from .database import OrchestratorDB
from .edges import edges_touching, row_to_edge
from .memories import row_to_node
from .provenance import CapturedSource, sources_of
from .tables import MemoryRow


@dataclass(frozen=True)
class RankInputs:
    """The columns ranking's modifiers read of one memory."""

    memory_id: str
    importance: int
    confidence: float
    created_at: str
    type: str


@dataclass(frozen=True)
class Brief:
    """A neighbouring memory, as much of it as a bundle shows."""

    memory_id: str
    type: MemoryType
    summary: str
    status: Status


@dataclass(frozen=True)
class Assembly:
    """The rows of a bundle: the nodes, the edges touching them, the memories those
    edges reach, and the nodes' sources."""

    nodes: dict[str, MemoryNode]
    edges: list[MemoryEdge]
    neighbors: list[Brief]
    sources: list[CapturedSource]


def passing(odb: OrchestratorDB, ids: Sequence[str], statuses: Sequence[str],
            types: Sequence[str] | None) -> set[str]:
    """Those of ``ids`` that are live, in ``statuses`` and (if given) of ``types``."""
    if not ids:
        return set()
    # The unary + keeps SQLite on the memory_id index: without table statistics it
    # would otherwise scan the status index (measured: 3 ms instead of 0.1 ms at 10k).
    sql = (f"SELECT memory_id FROM memories WHERE memory_id IN ({','.join('?' * len(ids))}) "
           f"AND +forgotten = 0 AND +status IN ({','.join('?' * len(statuses))})")
    params: list[Any] = [*ids, *statuses]
    if types is not None:
        sql += f" AND +type IN ({','.join('?' * len(types))})"
        params += types
    return {r[0] for r in odb.sql(sql, params)}


def rank_inputs(odb: OrchestratorDB, ids: Sequence[str]) -> list[RankInputs]:
    """Importance, confidence and createdAt of each of ``ids`` that exists."""
    if not ids:
        return []
    rows = odb.sql(f"SELECT memory_id, importance, confidence, created_at, type FROM memories "
                   f"WHERE memory_id IN ({','.join('?' * len(ids))})", list(ids))
    return [RankInputs(*row) for row in rows]


def assembly(odb: OrchestratorDB, ids: Sequence[str]) -> Assembly:
    """The nodes ``ids``, the edges touching them (by edgeId), the memories at their
    other ends (by memoryId) and the nodes' sources (oldest first)."""
    if not ids:
        return Assembly({}, [], [], [])
    with odb.bound():
        nodes = {r.memory_id: row_to_node(r, odb.orchestrator_id)
                 for r in MemoryRow.select().where(MemoryRow.memory_id.in_(list(ids)))}
        edges = [row_to_edge(e) for e in edges_touching(ids)]
        outside = sorted({end for e in edges for end in (e.from_memory_id, e.to_memory_id)}
                         - set(ids))
        neighbors = [Brief(r.memory_id, MemoryType(r.type), r.summary, Status(r.status))
                     for r in MemoryRow.select(MemoryRow.memory_id, MemoryRow.type,
                                               MemoryRow.summary, MemoryRow.status)
                     .where(MemoryRow.memory_id.in_(outside))
                     .order_by(MemoryRow.memory_id)] if outside else []
        return Assembly(nodes, edges, neighbors, sources_of(odb, ids))
