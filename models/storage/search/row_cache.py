"""The rows recall filters, ranks and assembles, cached in the reading process.

Per orchestrator file (``OrchestratorDB.cache``), keyed by ``meta.rows_seq``: a
counter that SQLite triggers (schema 7, steps_rows.py) bump in the same transaction
as every insert, update or delete of ``memories``, ``memory_edges`` or
``memory_sources``. A read snapshot that sees counter value ``s`` sees exactly the
rows of ``s``, so a cache filled only from snapshots at ``s`` holds those rows and
nothing else; a snapshot at another value starts a new cache (the old one is
dropped with its rows). Writes from other processes are seen at the next snapshot.

What it holds, per memoryId, as read: the node row (recall_reads' columns) and the
``forgotten`` flag (absent ids too, as None), the edges touching the memory, its
sources, and its node (a frozen model, made once of the row). It is filled
lazily, only inside an :meth:`OrchestratorDB.snapshot` (never in a write
transaction: a rolled-back write would leave rows of a counter value that never
was); the counter is read once per snapshot (``odb.memo()``). A file without the
counter (written before schema 7, opened by a reader that never migrates) gets no
cache: every read goes to SQL as before.

A hard forget in this process drops the cache (:func:`evict`); one in another
process empties the forgotten row and bumps the counter, so the next snapshot here
drops the old cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchmem.models.storage.schema.tables import META_ROWS_SEQ

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

Row = tuple[Any, ...]
_CACHE_KEY = "row_cache"
_MEMO_KEY = "row_cache"
#: Past this many memories held the cache starts again (memory bound; refilled lazily).
MAX_MEMORIES = 200_000
_NONE = object()  # a missing entry (None is an entry: no such memory)
_SEQ = f"SELECT value FROM meta WHERE key = '{META_ROWS_SEQ}'"


@dataclass
class RowCache:
    """The rows of one orchestrator file at one counter value ``seq``."""

    seq: str
    #: memoryId -> (node row, forgotten), or None when no such memory exists.
    rows: dict[str, tuple[Row, int] | None] = field(default_factory=dict)
    #: memoryId -> the edge rows touching it.
    edges: dict[str, list[Row]] = field(default_factory=dict)
    #: memoryId -> its source rows, each led by memory_sources.id.
    sources: dict[str, list[Row]] = field(default_factory=dict)
    #: memoryId -> its node (a frozen model), made of its row (recall_reads.nodes).
    nodes: dict[str, Any] = field(default_factory=dict)
    #: Other reads of one memory each (neighbours, contradictions): name -> memoryId ->
    #: what was read. Their readers never change what they get.
    derived: dict[Any, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fill(self, table: dict[str, Any], ids: Sequence[str],
             read: Callable[[list[str]], dict[str, Any]]) -> dict[str, Any]:
        """What ``table`` holds for each of ``ids``, reading what it lacks (``read`` gives
        every id asked). The answer is built here, not looked up in ``table`` after, so
        that a clear (the bound, another thread's) cannot take an id from under it."""
        wanted = list(dict.fromkeys(ids))
        held = {m: found for m in wanted if (found := table.get(m, _NONE)) is not _NONE}
        missing = [m for m in wanted if m not in held]
        if not missing:
            return held
        found = read(missing)
        with self.lock:
            if len(self.rows) > MAX_MEMORIES:
                for kept in (self.rows, self.edges, self.sources, self.nodes, self.derived):
                    kept.clear()
            table.update(found)
        return {**held, **found}

    def per_memory(self, name: Any, ids: Sequence[str],
                   read: Callable[[list[str]], dict[str, Any]]) -> dict[str, Any]:
        """What ``read`` gives for each of ``ids`` under ``name``, read once per id."""
        return self.fill(self.derived.setdefault(name, {}), ids, read)


def made_once(cache: RowCache | None, name: Any, ids: Sequence[str],
              make: Callable[[list[str]], dict[str, Any]]) -> dict[str, Any]:
    """What ``make`` gives for each of ``ids``: through the snapshot's ``cache`` (under
    ``name``, each id's made once per counter value), or all made now without one."""
    if cache is None:
        return make(list(dict.fromkeys(ids)))
    return cache.per_memory(name, ids, make)


def current(odb: OrchestratorDB) -> RowCache | None:
    """The cache for this snapshot's counter value, or None: outside a snapshot, in a
    write transaction, or for a file without the counter."""
    memo = odb.memo()
    if memo is None or odb.writing():
        return None
    if _MEMO_KEY in memo:
        found: RowCache | None = memo[_MEMO_KEY]
        return found
    rows = odb.sql(_SEQ)
    cache = None
    if rows:
        seq = str(rows[0][0])
        held = odb.cache.get(_CACHE_KEY)
        if isinstance(held, RowCache) and held.seq == seq:
            cache = held
        else:
            cache = odb.cache[_CACHE_KEY] = RowCache(seq)
    memo[_MEMO_KEY] = cache
    return cache


def evict(odb: OrchestratorDB) -> None:
    """Drop this process's cache of ``odb`` (a hard forget: none of its bytes stay)."""
    odb.cache.pop(_CACHE_KEY, None)
    memo = odb.memo()
    if memo is not None:
        memo.pop(_MEMO_KEY, None)
