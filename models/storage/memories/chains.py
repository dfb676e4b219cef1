"""Updates chains: from a memory to the newest one that updates it (its head).

An ``Updates`` edge goes from the newer memory to the older one it replaces. The head
of a memory is reached by following those edges backwards (to -> from) until none is
left; a chain is at most :data:`MAX_CHAIN` steps and a cycle (two edges made by hand
in both directions) stops at the first memory seen twice. Runs inside the caller's
``odb.read()``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from orchmem.models.storage.memories.validity_columns import has_time

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

MAX_CHAIN = 50
_NEWER = ("SELECT e.to_memory_id, e.from_memory_id FROM memory_edges AS e "
          "JOIN memories AS m ON m.memory_id = e.from_memory_id "
          "WHERE e.edge_type = 'Updates' AND e.to_memory_id IN (SELECT value FROM json_each(?)) "
          "AND m.forgotten = 0 AND m.status != 'retracted' AND m.created_at <= ? {valid}"
          "ORDER BY e.to_memory_id, m.created_at DESC, e.from_memory_id")
#: Later than any stored time: no bound.
_UNBOUNDED = "9999"


def heads(odb: OrchestratorDB, memory_ids: Sequence[str], known_at: str | None = None,
          as_of: str | None = None) -> dict[str, str]:
    """memoryId -> the head of its Updates chain (itself when nothing updates it).

    When two memories update the same one, the newer (createdAt) is followed. With
    ``known_at``, only memories stored by then are followed: the head as we knew it
    then; with ``as_of``, only memories true by then (validFrom, else createdAt): the
    head of what was true then.
    """
    timed = as_of is not None and has_time(odb)
    sql = _NEWER.format(valid="AND COALESCE(m.valid_from, m.created_at) <= ? " if timed
                        else "")
    head = {m: m for m in memory_ids}
    frontier = set(memory_ids)
    seen: dict[str, set[str]] = {m: {m} for m in memory_ids}
    for _ in range(MAX_CHAIN):
        if not frontier:
            break
        newer: dict[str, str] = {}
        bounds = (known_at or _UNBOUNDED, *((as_of,) if timed else ()))
        for older, newest in odb.sql(sql, (json.dumps(sorted(frontier)), *bounds)):
            newer.setdefault(older, newest)
        frontier = set()
        for start, current in head.items():
            step = newer.get(current)
            if step is not None and step not in seen[start]:
                seen[start].add(step)
                head[start] = step
                frontier.add(step)
    return head
