"""Recall's reads: the candidate filter, what ranking needs, and the rows of a bundle.

Recall runs all of them (with ``fts.search`` and ``vectors.search``) inside one
``odb.read()``, so the searches, the filters and the assembled nodes see one snapshot:
a memory forgotten meanwhile is either whole in the answer or not in it at all.

The hot path is lean: each statement is one fixed SQL text (a list of ids is one JSON
parameter, read by ``json_each``), so sqlite3's statement cache prepares it once per
connection; rows come back as tuples, never as Peewee model instances; the rows read
for ranking are reused for the bundle's nodes instead of being read twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchmem.models.core.shapes import (
    CapturedBy,
    EdgeType,
    MemoryEdge,
    MemoryNode,
    MemoryType,
    Source,
    SourceType,
    Status,
)
from orchmem.models.core.trusted import trusted
from orchmem.models.storage.memories.governance_columns import governance_fields
from orchmem.models.storage.memories.provenance import CapturedSource
from orchmem.models.storage.memories.validity_columns import (
    NO_TIME_COLUMNS_SQL,
    TIME_COLUMNS_SQL,
    has_time,
)
from orchmem.models.storage.search import row_cache
from orchmem.models.storage.visibility import View, reached_statuses

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

#: The columns of a node, in the order :func:`_node` reads them.
_NODE_COLUMNS = ("memory_id, type, importance, content, summary, confidence, status, "
                 "source_type, source_path, conversation_id, workflow_run_id, step_id, "
                 "captured_by, created_at, updated_at, "
                 # governance (schema 3), read by memories.governance_fields
                 "tier, scope, session_id, project_id, sensitivity, tags, metadata, ")
#: Positions in a node row (``_NODE_COLUMNS`` then the time columns) that readers
#: outside this module use (models/recall/plans.py): one place to change them.
CONTENT, STATUS, CREATED_AT, UPDATED_AT, GOVERNANCE = 3, 6, 13, 14, slice(15, 22)
VALID_FROM, VALID_TO, TIME_REFS = 22, 23, 24
_IDS = "(SELECT value FROM json_each(?))"
# The unary + keeps SQLite on the memory_id index: without table statistics it would
# otherwise scan the status index (measured: 3 ms instead of 0.1 ms at 10k).
_PASSING = (f"SELECT memory_id FROM memories WHERE memory_id IN {_IDS} AND +forgotten = 0 "
            f"AND +status IN {_IDS}")
_PASSING_TYPES = f"{_PASSING} AND +type IN {_IDS}"
#: A file written before schema 4 has no time columns (a reader never migrates it).
_NODES = {True: f"SELECT {_NODE_COLUMNS}{TIME_COLUMNS_SQL} FROM memories WHERE memory_id IN {_IDS}",
          False: f"SELECT {_NODE_COLUMNS}{NO_TIME_COLUMNS_SQL} FROM memories "
          f"WHERE memory_id IN {_IDS}"}
#: :data:`_NODES` and the ``forgotten`` flag last (the row cache's read).
_NODES_LIVE = {with_time: sql.replace(" FROM memories", ", forgotten FROM memories", 1)
               for with_time, sql in _NODES.items()}
_TIER, _SCOPE, _SESSION, _PROJECT, _SENSITIVITY, _TAGS = 15, 16, 17, 18, 19, 20
_EDGES = ("SELECT edge_id, from_memory_id, to_memory_id, edge_type, weight, reason, created_at "
          f"FROM memory_edges WHERE from_memory_id IN {_IDS} OR to_memory_id IN {_IDS} "
          "ORDER BY edge_id")
_CONTENTS = f"SELECT memory_id, content FROM memories WHERE memory_id IN {_IDS}"
#: On the (status, type, created_at) index: a range of createdAt, bounded.
_SAID = (f"SELECT memory_id FROM memories WHERE status IN {_IDS} AND type IN {_IDS} "
         "AND created_at >= ? AND created_at < ? AND +forgotten = 0 ORDER BY created_at LIMIT ?")
_BRIEFS = (f"SELECT memory_id, type, summary, status FROM memories WHERE memory_id IN {_IDS} "
           "ORDER BY memory_id")
_SOURCES = ("SELECT id, memory_id, source_type, source_path, conversation_id, workflow_run_id, "
            f"step_id, captured_by, captured_at FROM memory_sources WHERE memory_id IN {_IDS} "
            "ORDER BY id")


def _json(values: Sequence[str]) -> str:
    return json.dumps(list(values))


@dataclass(frozen=True, slots=True)
class RankInputs:
    """The columns ranking's modifiers read of one memory, and the node's whole row
    (reused by :func:`assembly`)."""

    memory_id: str
    importance: int
    confidence: float
    created_at: str
    type: str
    row: tuple[Any, ...]


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
            types: Sequence[str] | None, view: View) -> set[str]:
    """Those of ``ids`` that are live, in ``statuses``, (if given) of ``types``, and
    that ``view`` sees (scope, sensitivity, tags)."""
    if not ids:
        return set()
    cache = row_cache.current(odb)
    if cache is not None:
        return _passing_cached(odb, cache, ids, set(statuses),
                               None if types is None else set(types), view)
    seen, seen_params = view.sql()
    if types is None:
        return {r[0] for r in odb.sql(f"{_PASSING} AND {seen}",
                                      (_json(ids), _json(statuses), *seen_params))}
    return {r[0] for r in odb.sql(f"{_PASSING_TYPES} AND {seen}",
                                  (_json(ids), _json(statuses), _json(types), *seen_params))}


def rank_inputs(odb: OrchestratorDB, ids: Sequence[str]) -> list[RankInputs]:
    """Importance, confidence and createdAt of each of ``ids`` that exists (with its row)."""
    if not ids:
        return []
    cache = row_cache.current(odb)
    if cache is None:
        return [_inputs(row) for row in node_rows(odb, ids)]

    def read(missing: list[str]) -> dict[str, RankInputs | None]:
        found = _cached_rows(odb, cache, missing)
        return {m: None if (entry := found[m]) is None else _inputs(entry[0]) for m in missing}
    held = cache.per_memory("rank_inputs", ids, read)
    return [found for m in sorted(set(ids)) if (found := held[m]) is not None]


def _inputs(row: tuple[Any, ...]) -> RankInputs:
    return RankInputs(row[0], row[2], row[5], row[13], row[1], row)


def node_rows(odb: OrchestratorDB, ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """The node rows of those of ``ids`` that exist, by memoryId (as SQLite gives them
    for ``IN``: sorted, each once), from the row cache when there is one."""
    cache = row_cache.current(odb)
    if cache is None:
        return odb.sql(_NODES[has_time(odb)], (_json(ids),))
    found = _cached_rows(odb, cache, ids)
    return [entry[0] for m in sorted(set(ids)) if (entry := found[m]) is not None]


def _cached_rows(odb: OrchestratorDB, cache: row_cache.RowCache, ids: Sequence[str]
                 ) -> dict[str, tuple[tuple[Any, ...], int] | None]:
    """memoryId -> (node row, forgotten) or None, for each of ``ids``, through ``cache``."""
    def read(missing: list[str]) -> dict[str, tuple[tuple[Any, ...], int] | None]:
        rows: dict[str, tuple[tuple[Any, ...], int] | None] = dict.fromkeys(missing)
        for row in odb.sql(_NODES_LIVE[has_time(odb)], (_json(missing),)):
            rows[row[0]] = (row[:-1], row[-1])
        return rows
    return cache.fill(cache.rows, ids, read)


def _passing_cached(odb: OrchestratorDB, cache: row_cache.RowCache, ids: Sequence[str],
                    statuses: set[str], types: set[str] | None, view: View) -> set[str]:
    """:func:`passing` over the cached rows (:meth:`View.sees` is its SQL in Python)."""
    found = _cached_rows(odb, cache, ids)
    out = set()
    for memory_id in ids:
        entry = found[memory_id]
        if entry is None or entry[1]:
            continue
        row = entry[0]
        if row[STATUS] in statuses and (types is None or row[1] in types) and view.sees(
                row[_SCOPE], row[_SESSION], row[_PROJECT], row[_SENSITIVITY],
                json.loads(row[_TAGS]) if view.tags else [], row[_TIER]):
            out.add(memory_id)
    return out


def contents(odb: OrchestratorDB, ids: Sequence[str]) -> dict[str, str]:
    """memoryId -> content, for those of ``ids`` that exist."""
    if not ids:
        return {}
    if row_cache.current(odb) is not None:
        return {row[0]: row[CONTENT] for row in node_rows(odb, ids)}
    return {r[0]: r[1] for r in odb.sql(_CONTENTS, (_json(ids),))}


def said_between(odb: OrchestratorDB, start: str, end: str, statuses: Sequence[str],
                 types: Sequence[str], limit: int) -> list[str]:
    """The ids of at most ``limit`` live memories of ``statuses`` and ``types`` created
    in ``[start, end)`` (stored timestamps or their date prefixes), oldest first."""
    return [r[0] for r in odb.sql(_SAID, (_json(statuses), _json(types), start, end, limit))]


def nodes(rows: Sequence[tuple[Any, ...]], orchestrator_id: str,
          cache: row_cache.RowCache | None = None) -> dict[str, MemoryNode]:
    """memoryId -> its node, from node rows read in this snapshot (:attr:`RankInputs.row`);
    with the snapshot's row ``cache`` (whose rows they are), each node is made once
    (a node is frozen)."""
    if cache is None:
        return {row[0]: _node(row, orchestrator_id) for row in rows}
    made = cache.nodes
    out = {}
    for row in rows:
        node = made.get(row[0])
        if node is None:
            node = made[row[0]] = _node(row, orchestrator_id)
        out[row[0]] = node
    return out


def assembly(odb: OrchestratorDB, ids: Sequence[str], view: View, statuses: Sequence[str],
             rows: Mapping[str, tuple[Any, ...]] | None = None,
             built: Mapping[str, MemoryNode] | None = None) -> Assembly:
    """The nodes ``ids`` (already passed by ``view``), the edges touching them (by
    edgeId), the memories at their other ends (by memoryId) and the nodes' sources
    (oldest first).

    An edge is kept only when ``view`` sees its other end too, with a status a memory
    reached from one asked for ``statuses`` may have (visibility.reached_statuses):
    the edge to a restricted memory, another session's or a forgotten one is left out
    with its id, and so is that memory. ``rows`` are node rows already read in this
    snapshot (:attr:`RankInputs.row`) and ``built`` nodes already made of such rows
    (:func:`nodes`); only the ids missing from both are read again.
    """
    if not ids:
        return Assembly({}, [], [], [])
    known, made = rows or {}, built or {}
    missing = [m for m in ids if m not in known and m not in made]
    found = [known[m] for m in ids if m in known and m not in made]
    if missing:
        found += node_rows(odb, missing)
    cache = row_cache.current(odb)
    by_id = {**{m: made[m] for m in ids if m in made},
             **nodes(found, odb.orchestrator_id, cache)}
    asked = set(ids)
    edge_rows = _edge_rows(odb, cache, ids)
    ends = {end for e in edge_rows for end in (e[1], e[2])} - asked
    shown = passing(odb, sorted(ends), reached_statuses(statuses), None, view) if ends \
        else set()
    ends_shown = asked | shown
    edges = _edges(cache, [e for e in edge_rows if e[1] in ends_shown and e[2] in ends_shown])
    outside = sorted(shown)
    neighbors = [Brief(r[0], MemoryType(r[1]), r[2], Status(r[3]))
                 for r in _brief_rows(odb, cache, outside)] if outside else []
    return Assembly(by_id, edges, neighbors, _captured(odb, cache, ids))


def _edges(cache: row_cache.RowCache | None, rows: list[tuple[Any, ...]]) -> list[MemoryEdge]:
    """The edges of ``rows``; with the snapshot's row ``cache``, each made once (frozen)."""
    def made(edge_rows: Sequence[tuple[Any, ...]]) -> dict[str, MemoryEdge]:
        return {e[0]: trusted(MemoryEdge, edge_id=e[0], from_memory_id=e[1], to_memory_id=e[2],
                              edge_type=EdgeType(e[3]), weight=e[4], reason=e[5],
                              created_at=e[6]) for e in edge_rows}
    by_id = {e[0]: e for e in rows}
    held = row_cache.made_once(cache, "edge", list(by_id),
                               lambda missing: made([by_id[k] for k in missing]))
    return [held[k] for k in by_id]


def _captured(odb: OrchestratorDB, cache: row_cache.RowCache | None,
              ids: Sequence[str]) -> list[CapturedSource]:
    """The sources of ``ids``, oldest first; with the snapshot's row ``cache``, each
    memory's made once (they are frozen)."""
    def made(missing: list[str]) -> dict[str, list[tuple[int, CapturedSource]]]:
        rows = _sources_by_memory(odb, missing) if cache is None else \
            _held_sources(odb, cache, missing)
        return {m: [(r[0], CapturedSource(memory_id=r[1], source=_source(r[2:8]),
                                          captured_at=r[8])) for r in of]
                for m, of in rows.items()}
    held = row_cache.made_once(cache, "captured", ids, made)
    return [c for _, c in sorted((p for made_of in held.values() for p in made_of),
                                 key=lambda p: p[0])]


def prefetch(odb: OrchestratorDB, ids: Sequence[str]) -> None:
    """Read the edges and sources of ``ids`` into the snapshot's row cache now (none:
    nothing): recall does it on its helper for the first text hits while it embeds."""
    cache = row_cache.current(odb)
    if cache is not None and ids:
        _edge_rows(odb, cache, ids)
        _held_sources(odb, cache, ids)


def _edge_rows(odb: OrchestratorDB, cache: row_cache.RowCache | None,
               ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """The edge rows touching any of ``ids``, by edgeId."""
    if cache is None:
        listed = _json(ids)
        return odb.sql(_EDGES, (listed, listed))

    def read(missing: list[str]) -> dict[str, list[tuple[Any, ...]]]:
        listed = _json(missing)
        touching: dict[str, list[tuple[Any, ...]]] = {m: [] for m in missing}
        for edge in odb.sql(_EDGES, (listed, listed)):
            for end in dict.fromkeys((edge[1], edge[2])):
                if end in touching:
                    touching[end].append(edge)
        return touching
    held = cache.fill(cache.edges, ids, read)
    edges = {e[0]: e for touching in held.values() for e in touching}
    return [edges[k] for k in sorted(edges)]


def _held_sources(odb: OrchestratorDB, cache: row_cache.RowCache,
                  ids: Sequence[str]) -> dict[str, list[tuple[Any, ...]]]:
    """memoryId -> its source rows (each led by memory_sources.id), through ``cache``."""
    return cache.fill(cache.sources, ids, lambda missing: _sources_by_memory(odb, missing))


def _sources_by_memory(odb: OrchestratorDB, ids: Sequence[str]
                       ) -> dict[str, list[tuple[Any, ...]]]:
    """memoryId -> its source rows, oldest first, for each of ``ids`` (one read)."""
    held: dict[str, list[tuple[Any, ...]]] = {m: [] for m in ids}
    for row in odb.sql(_SOURCES, (_json(ids),)):
        held[row[1]].append(row)
    return held


def _brief_rows(odb: OrchestratorDB, cache: row_cache.RowCache | None,
                ids: list[str]) -> list[tuple[Any, ...]]:
    """(memoryId, type, summary, status) of those of the sorted ``ids`` that exist."""
    if cache is None:
        return odb.sql(_BRIEFS, (_json(ids),))
    return [(r[0], r[1], r[4], r[STATUS]) for r in node_rows(odb, ids)]


def _source(columns: Sequence[Any]) -> Source:
    return trusted(
        Source, source_type=SourceType(columns[0]), source_path=columns[1],
        conversation_id=columns[2], workflow_run_id=columns[3], step_id=columns[4],
        captured_by=CapturedBy(columns[5]))


def _node(row: tuple[Any, ...], orchestrator_id: str) -> MemoryNode:
    """A node from a row of :data:`_NODE_COLUMNS` (as ``memories.row_to_node`` builds it)."""
    return trusted(
        MemoryNode, memory_id=row[0], orchestrator_id=orchestrator_id, type=MemoryType(row[1]),
        importance=row[2], content=row[3], summary=row[4], confidence=row[5],
        status=Status(row[6]), source=_source(row[7:13]), created_at=row[13],
        updated_at=row[UPDATED_AT], **governance_fields(*row[GOVERNANCE]),
        valid_from=row[VALID_FROM], valid_to=row[VALID_TO],
        time_refs=json.loads(row[TIME_REFS]) if row[TIME_REFS] else None)
