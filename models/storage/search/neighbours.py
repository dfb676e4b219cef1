"""The memories next to a recalled one: the same conversation's nearby memories, and the
ends of its edges. Runs inside the caller's ``odb.read()``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchmem.models.storage.search import row_cache

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

#: How far (in rows) a conversation's neighbour is looked for: rows of other
#: conversations written in between are skipped, up to this many.
SCAN_ROWS = 64
_SIDE = ("(SELECT json_group_array(memory_id) FROM (SELECT m.memory_id FROM memories m "
         "WHERE m.conversation_id = h.conversation_id AND m.id {op} h.id "
         "AND m.id {bound} h.id {sign} ? AND m.forgotten = 0 ORDER BY m.id {order} LIMIT ?))")
#: Each hit, whether it asks, and its conversation's neighbours on each side (nearest
#: first), in one statement (one per side and hit was 2 statements a hit).
_HITS = ("SELECT h.memory_id, h.content, "
         + _SIDE.format(op="<", bound=">=", sign="-", order="DESC") + ", "
         + _SIDE.format(op=">", bound="<=", sign="+", order="") + " FROM memories h "
         "WHERE h.memory_id IN (SELECT value FROM json_each(?))")
_EDGES = ("SELECT from_memory_id, to_memory_id FROM memory_edges "
          "WHERE from_memory_id IN (SELECT value FROM json_each(?)) "
          "OR to_memory_id IN (SELECT value FROM json_each(?)) ORDER BY edge_id")


@dataclass(frozen=True, slots=True)
class Near:
    """A neighbour of a hit: how it is reached ("before", "after": the same
    conversation, earlier or later; "edge") and whether the hit asked a question."""

    memory_id: str
    how: str
    hit_asks: bool


def around(odb: OrchestratorDB, memory_ids: Sequence[str], radius: int) -> dict[str, list[Near]]:
    """memoryId -> its neighbours: up to ``radius`` memories of the same conversation on
    each side (by write order), then the other ends of its edges (each memory's read
    once per counter value when the snapshot has a row cache)."""
    if not memory_ids:
        return {}
    cache = row_cache.current(odb)
    if cache is None:
        return _around(odb, memory_ids, radius)
    held = cache.per_memory(("around", radius), memory_ids,
                            lambda missing: _around(odb, missing, radius))
    return {m: held[m] for m in memory_ids}


def _around(odb: OrchestratorDB, memory_ids: Sequence[str],
            radius: int) -> dict[str, list[Near]]:
    listed = json.dumps(list(memory_ids))
    out: dict[str, list[Near]] = {m: [] for m in memory_ids}
    asks: dict[str, bool] = {}
    side = max(radius, 0)
    for memory_id, content, before, after in odb.sql(
            _HITS, (SCAN_ROWS, side, SCAN_ROWS, side, listed)):
        asks[memory_id] = content.rstrip().endswith("?")
        for found, how in ((before, "before"), (after, "after")):
            out[memory_id] += [Near(m, how, asks[memory_id]) for m in json.loads(found)]
    for source, target in odb.sql(_EDGES, (listed, listed)):
        for hit, other in ((source, target), (target, source)):
            if hit in out and all(n.memory_id != other for n in out[hit]):
                out[hit].append(Near(other, "edge", asks.get(hit, False)))
    return out
