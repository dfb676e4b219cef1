"""The memories next to a recalled one: the same conversation's nearby memories, and the
ends of its edges. Runs inside the caller's ``odb.read()``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .database import OrchestratorDB

#: How far (in rows) a conversation's neighbour is looked for: rows of other
#: conversations written in between are skipped, up to this many.
SCAN_ROWS = 64
_BEFORE = ("SELECT memory_id FROM memories WHERE conversation_id = ? AND id < ? AND id >= ? "
           "AND forgotten = 0 ORDER BY id DESC LIMIT ?")
_AFTER = ("SELECT memory_id FROM memories WHERE conversation_id = ? AND id > ? AND id <= ? "
          "AND forgotten = 0 ORDER BY id LIMIT ?")
_HITS = ("SELECT memory_id, id, conversation_id, content FROM memories "
         "WHERE memory_id IN (SELECT value FROM json_each(?))")
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
    each side (by write order), then the other ends of its edges."""
    if not memory_ids:
        return {}
    listed = json.dumps(list(memory_ids))
    out: dict[str, list[Near]] = {m: [] for m in memory_ids}
    asks: dict[str, bool] = {}
    for memory_id, rowid, conversation, content in odb.sql(_HITS, (listed,)):
        asks[memory_id] = content.rstrip().endswith("?")
        if conversation is None or radius <= 0:
            continue
        for query, bound, how in ((_BEFORE, rowid - SCAN_ROWS, "before"),
                                  (_AFTER, rowid + SCAN_ROWS, "after")):
            out[memory_id] += [Near(r[0], how, asks[memory_id])
                               for r in odb.sql(query, (conversation, rowid, bound, radius))]
    for source, target in odb.sql(_EDGES, (listed, listed)):
        for hit, other in ((source, target), (target, source)):
            if hit in out and all(n.memory_id != other for n in out[hit]):
                out[hit].append(Near(other, "edge", asks.get(hit, False)))
    return out
