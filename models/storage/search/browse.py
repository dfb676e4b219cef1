"""The console's memory list: memories newest first under a reader's view, with the
filters a person browses by (type, status, tier, scope, session, project, tag, time),
a page at a time, with the number of matches.

The view (models/storage/visibility.py) is applied first: a filter only narrows what
the reader may see.
"""

from __future__ import annotations

from dataclasses import dataclass

from peewee import SQL

from orchmem.models.core.shapes import MemoryNode
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.rows import row_to_node
from orchmem.models.storage.memories.validity_columns import memory_fields
from orchmem.models.storage.reflection.units import topics_of
from orchmem.models.storage.schema.tables import MemoryRow, live_rows
from orchmem.models.storage.visibility import View


@dataclass(frozen=True)
class Filters:
    """What to keep (None or empty: any). Times are stored-format timestamps."""

    types: tuple[str, ...] = ()
    status: str | None = "active"
    tier: str | None = None
    scope: str | None = None
    session_id: str | None = None
    project_id: str | None = None
    created_from: str | None = None
    created_to: str | None = None


def browse(odb: OrchestratorDB, filters: Filters, view: View, *, limit: int = 50,
           offset: int = 0) -> tuple[list[MemoryNode], int]:
    """``(page of memories newest first, how many match in all)``."""
    seen, params = view.sql()
    with odb.read():
        query = MemoryRow.select(*memory_fields()).where(live_rows(), SQL(seen, params))
        if filters.types:
            query = query.where(MemoryRow.type.in_(list(filters.types)))
        for column, value in ((MemoryRow.status, filters.status), (MemoryRow.tier, filters.tier),
                              (MemoryRow.scope, filters.scope),
                              (MemoryRow.session_id, filters.session_id),
                              (MemoryRow.project_id, filters.project_id)):
            if value:
                query = query.where(column == value)
        if filters.created_from:
            query = query.where(MemoryRow.created_at >= filters.created_from)
        if filters.created_to:
            query = query.where(MemoryRow.created_at < filters.created_to)
        total = query.count()
        rows = list(query.order_by(MemoryRow.created_at.desc(), MemoryRow.memory_id)
                    .limit(limit).offset(offset))
        topics = topics_of([r.memory_id for r in rows])
        return [row_to_node(r, odb.orchestrator_id, topics.get(r.memory_id))
                for r in rows], total
