"""Selecting memories by policy: by ids, cutoff, scope, source, tag and tier.

Every selector given must hold (they combine with AND); a memory matches a source
selector when ANY of its sources (the first or a later restatement) came from that
conversation, workflow run or file. Forgotten memories never match; a soft selection
takes active memories only (a soft forget retracts them), a hard one any live memory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchmem.models.storage.db.database import OrchestratorDB


@dataclass(frozen=True)
class Selector:
    memory_ids: tuple[str, ...] = ()
    #: ISO 8601 UTC (format_ts): created strictly before it.
    before: str | None = None
    session_id: str | None = None
    project_id: str | None = None
    conversation_id: str | None = None
    workflow_run_id: str | None = None
    #: Canonical source path (an ingested file).
    source_path: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    #: Any of these tiers (models/core/governance_fields.py).
    tiers: tuple[str, ...] = field(default_factory=tuple)
    #: Of this scope (global, session, project): "every session-scoped memory".
    scope: str | None = None

    def empty(self) -> bool:
        return not (self.memory_ids or self.before or self.session_id or self.project_id
                    or self.conversation_id or self.workflow_run_id or self.source_path
                    or self.tags or self.tiers or self.scope)

    def sql(self) -> tuple[str, list[Any]]:
        """``(condition, parameters)`` over ``memories m``."""
        where: list[str] = []
        params: list[Any] = []
        if self.memory_ids:
            where.append("m.memory_id IN (SELECT value FROM json_each(?))")
            params.append(json.dumps(list(self.memory_ids)))
        for column, value in (("created_at <", self.before), ("session_id =", self.session_id),
                              ("project_id =", self.project_id), ("scope =", self.scope)):
            if value is not None:
                where.append(f"m.{column} ?")
                params.append(value)
        for column, value in (("conversation_id", self.conversation_id),
                              ("workflow_run_id", self.workflow_run_id),
                              ("source_path", self.source_path)):
            if value is not None:
                where.append(f"(m.{column} = ? OR EXISTS (SELECT 1 FROM memory_sources s "
                             f"WHERE s.memory_id = m.memory_id AND s.{column} = ?))")
                params += [value, value]
        for tag in self.tags:
            where.append("EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value = ?)")
            params.append(tag)
        if self.tiers:
            where.append("m.tier IN (SELECT value FROM json_each(?))")
            params.append(json.dumps(list(self.tiers)))
        return " AND ".join(where) or "1", params


def select(odb: OrchestratorDB, selector: Selector, *, hard: bool) -> list[str]:
    """The memoryIds ``selector`` matches, oldest first (inside or outside a transaction:
    one statement)."""
    condition, params = selector.sql()
    status = "" if hard else "AND m.status = 'active' "
    rows = odb.sql(f"SELECT m.memory_id FROM memories m WHERE m.forgotten = 0 {status}"
                   f"AND {condition} ORDER BY m.created_at, m.memory_id", params)
    return [r[0] for r in rows]


def select_ids(odb: OrchestratorDB, selector: Selector, *, hard: bool) -> list[str]:
    """:func:`select` in a read snapshot of its own."""
    with odb.read():
        return select(odb, selector, hard=hard)


def count_by(odb: OrchestratorDB, column: str, values: Sequence[str]) -> dict[str, int]:
    """Live memories per value of ``column`` (tier, scope or sensitivity), for stats."""
    assert column in ("tier", "scope", "sensitivity")
    rows = odb.sql(f"SELECT {column}, count(*) FROM memories WHERE forgotten = 0 "
                   f"GROUP BY {column}")
    counts = dict.fromkeys(values, 0)
    counts.update({r[0]: int(r[1]) for r in rows})
    return counts
