"""Whole memories as plain rows: what ``orchmem export`` reads and ``orchmem import`` writes.

Four kinds of row travel: ``records`` (memories), ``sources``, ``edges`` and ``audit``
(the memory_events log). Each is described by :func:`columns`, taken from the table
classes, so a column added by a later schema step travels without a change here. A
row is a dict keyed by the column's camelCase name; the audit's JSON columns travel
decoded (lists and objects, not strings). The internal rowids of memories and sources
stay behind (a memory's id is its memoryId; a source's order is kept instead).

Reads run inside the caller's ``odb.read()`` (one snapshot for the whole export);
writes inside its ``odb.write()`` (one transaction for the whole import).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from peewee import FloatField, IntegerField, Model

from orchmem.models.core.governance_fields import TIER_OF_TYPE, Tier
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.events import set_meta
from orchmem.models.storage.schema.tables import (
    FTS_TOKENIZER,
    META_EVENT_WATERMARK,
    META_ROWS_SEQ,
    MemoryEdgeRow,
    MemoryEventRow,
    MemoryRow,
    MemorySourceRow,
    live,
)

# The schema version an export's manifest names, for the import outside this layer (only
# models/storage/ imports the table module: tests/unit/test_layers.py).
from orchmem.models.storage.schema.tables import SCHEMA_VERSION as SCHEMA_VERSION

#: Kind of rows -> (table, columns left behind, ORDER BY of the export).
_KINDS: dict[str, tuple[type[Model], frozenset[str], str]] = {
    "records": (MemoryRow, frozenset({"id"}), "t.memory_id"),
    "sources": (MemorySourceRow, frozenset({"id"}), "t.memory_id, t.id"),
    "edges": (MemoryEdgeRow, frozenset(), "t.edge_id"),
    "audit": (MemoryEventRow, frozenset(), "t.id"),
}
KINDS = tuple(_KINDS)
#: The derived indexes' layout: the FTS5 tokenizer and the vector encoding. A rebuild
#: (``orchmem rebuild``) is needed when it changes; exports record it.
INDEX_VERSION = f"fts5[{FTS_TOKENIZER}]+float32-unit"
#: Audit columns stored as JSON text and exported as JSON values.
_JSON_COLUMNS = frozenset({"memory_ids", "before", "after", "tags", "metadata"})
#: The audit's rowid travels as ``eventId`` (its order); import gives new ones.
_RENAMED = {("audit", "id"): "eventId"}


@dataclass(frozen=True)
class Column:
    """One exported field: its key in a line, its SQL column, its kind and nullability."""

    key: str
    column: str
    kind: str  # "int" | "float" | "text" | "json"
    null: bool
    #: True when a line may leave it out (the table has a default for it).
    optional: bool
    #: The value a line that leaves it out gets (a JSON column's decoded).
    default: Any = None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def columns(kind: str) -> list[Column]:
    """The fields of one kind of row, in table order."""
    table, skipped, _ = _KINDS[kind]
    out = []
    for field in table._meta.sorted_fields:
        name = field.column_name
        if name in skipped:
            continue
        if name in _JSON_COLUMNS:
            kind_name = "json"
        elif isinstance(field, IntegerField | FloatField):
            kind_name = "float" if isinstance(field, FloatField) else "int"
        else:
            kind_name = "text"
        key = _RENAMED.get((kind, name), _camel(name))
        default = field.default
        if kind_name == "json" and isinstance(default, str):
            default = json.loads(default)
        out.append(Column(key=key, column=name, kind=kind_name, null=bool(field.null),
                          optional=field.default is not None or bool(field.null),
                          default=default))
    return out


def has_column(kind: str, column: str) -> bool:
    return any(c.column == column for c in columns(kind))


def restricted_ids(odb: OrchestratorDB) -> set[str]:
    """memoryIds whose sensitivity is Restricted (none while the schema has no such column)."""
    if not has_column("records", "sensitivity"):
        return set()
    return {r[0] for r in odb.sql(
        "SELECT memory_id FROM memories WHERE lower(sensitivity) = 'restricted'")}


def other_tier_ids(odb: OrchestratorDB, tiers: Sequence[str]) -> set[str]:
    """memoryIds of a tier not in ``tiers`` (none when ``tiers`` is empty: every tier
    kept, or while the schema has no tier column)."""
    if not tiers or not has_column("records", "tier"):
        return set()
    return {r[0] for r in odb.sql(
        "SELECT memory_id FROM memories WHERE tier NOT IN (SELECT value FROM json_each(?))",
        (json.dumps(list(tiers)),))}


def rows(odb: OrchestratorDB, kind: str) -> Iterator[dict[str, Any]]:
    """Every row of ``kind`` in export order (inside the caller's ``odb.read()``)."""
    table, _, order = _KINDS[kind]
    cols = columns(kind)
    select = ", ".join(f"t.{c.column}" for c in cols)
    cursor = odb.db.execute_sql(
        f"SELECT {select} FROM {table._meta.table_name} AS t ORDER BY {order}")
    for values in cursor:
        yield {c.key: (json.loads(v) if c.kind == "json" and v is not None else v)
               for c, v in zip(cols, values, strict=True)}



def stored_lines(odb: OrchestratorDB, memory_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{memoryId: its records line as an export writes it}`` of these ids already
    stored (inside a bound block)."""
    cols = columns("records")
    select = ", ".join(f"t.{c.column}" for c in cols)
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(memory_ids), 500):
        chunk = list(memory_ids[start:start + 500])
        cursor = odb.db.execute_sql(
            f"SELECT {select} FROM memories AS t WHERE t.memory_id IN "
            f"({', '.join('?' * len(chunk))})", chunk)
        for values in cursor:
            line = {c.key: (json.loads(v) if c.kind == "json" and v is not None else v)
                    for c, v in zip(cols, values, strict=True)}
            found[line["memoryId"]] = line
    return found


def existing_edges(odb: OrchestratorDB) -> set[tuple[str, str, str]]:
    """(from, to, edgeType) of every stored edge."""
    return {(f, t, e) for f, t, e in odb.sql(
        "SELECT from_memory_id, to_memory_id, edge_type FROM memory_edges")}


def existing_event_keys(odb: OrchestratorDB) -> set[tuple[Any, ...]]:
    """Identity of every stored audit event (op, ids, at, actor, key): import skips these."""
    return {tuple(row) for row in odb.sql(
        "SELECT op, memory_ids, at, actor, idempotency_key FROM memory_events")}


def event_key(line: dict[str, Any]) -> tuple[Any, ...]:
    """The identity :func:`existing_event_keys` gives, of one audit line."""
    return (line["op"], json.dumps(line["memoryIds"]), line["at"], line["actor"],
            line.get("idempotencyKey"))


def insert(odb: OrchestratorDB, kind: str, lines: Sequence[dict[str, Any]]) -> int:
    """Insert ``lines`` of ``kind`` (inside a write transaction); returns how many.

    Audit lines get new event ids after the last one, in their order, and their
    ``memory_event_ids`` pairs. Rows go in with ``executemany`` (Peewee's bulk insert
    builds its SQL value by value: 5x slower here, and this runs under the write lock).
    """
    if not lines:
        return 0
    table = _KINDS[kind][0]._meta.table_name
    cols = [c for c in columns(kind) if not (kind == "audit" and c.key == "eventId")]
    names = [c.column for c in cols]
    rows = _rows(kind, cols, lines)
    conn = odb.db.connection()
    if kind == "audit":
        first = int(odb.db.execute_sql("SELECT coalesce(max(id), 0) FROM memory_events")
                    .fetchone()[0]) + 1
        names = ["id", *names]
        rows = [(first + i, *row) for i, row in enumerate(rows)]
    conn.executemany(f"INSERT INTO {table} ({', '.join(names)}) "
                     f"VALUES ({', '.join('?' * len(names))})", rows)
    if kind == "audit":
        conn.executemany("INSERT INTO memory_event_ids (memory_id, event_id) VALUES (?, ?)",
                         [(m, first + i) for i, line in enumerate(lines)
                          for m in dict.fromkeys(line["memoryIds"])])
        set_meta(META_EVENT_WATERMARK, str(first + len(lines) - 1))
    return len(lines)


@contextmanager
def large_cache(odb: OrchestratorDB, kib: int = 256 * 1024) -> Iterator[None]:
    """This connection's page cache may grow to ``kib`` for the block, then is set back:
    a large import changes more pages than the usual cache holds, which would otherwise
    go to the WAL before the commit and be written there again when touched again."""
    conn = odb.db.connection()
    before = int(conn.execute("PRAGMA cache_size").fetchone()[0])
    conn.execute(f"PRAGMA cache_size = {-int(kib)}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA cache_size = {before}")


#: The row-by-row triggers :func:`deferred_triggers` holds back: each memory's full-text
#: entry, and the ``rows_seq`` bump of each inserted memory, source and edge.
_DEFERRED = ("memories_fts_insert", "memories_rows_seq_insert",
             "memory_sources_rows_seq_insert", "memory_edges_rows_seq_insert")


@contextmanager
def deferred_triggers(odb: OrchestratorDB) -> Iterator[None]:
    """Inserts in the block skip the row-by-row triggers of ``_DEFERRED`` (inside a write
    transaction, around :func:`insert` of records, sources and edges).

    At the block's end, in the same transaction: the new memories (rowids above the
    largest before the block) get their full-text entries in one statement, ``rows_seq``
    goes up by the rows inserted (what the triggers would have added), and each trigger
    is created again from its own stored SQL. An error in the block leaves them dropped
    until the transaction rolls back, which brings them back: the write lock is held
    throughout, so no other writer ever sees the file without them.
    """
    conn = odb.db.connection()
    saved = conn.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = "
                         f"'trigger' AND name IN ({', '.join('?' * len(_DEFERRED))})",
                         _DEFERRED).fetchall()
    tables = sorted({table for _, table, _ in saved})
    last = {t: conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {t}").fetchone()[0]
            for t in tables}
    for name, _, _ in saved:
        conn.execute(f"DROP TRIGGER {name}")
    yield
    names = {name for name, _, _ in saved}
    if "memories_fts_insert" in names:
        conn.execute("INSERT INTO memory_fts(rowid, content, summary) SELECT id, content, "
                     "summary FROM memories WHERE id > ? ORDER BY id", (last["memories"],))
    added = sum(conn.execute(f"SELECT count(*) FROM {t} WHERE rowid > ?", (last[t],))
                .fetchone()[0] for t in tables if f"{t}_rows_seq_insert" in names)
    if added:
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = ?",
                     (added, META_ROWS_SEQ))
    for _, _, sql in saved:
        conn.execute(sql)


def _rows(kind: str, cols: list[Column], lines: Sequence[dict[str, Any]]
          ) -> list[tuple[Any, ...]]:
    """Each line's values in ``cols``' order, as stored (:func:`_given`; a JSON column's
    value as JSON text): a column at a time (tens of thousands of lines in an import)."""
    by_column = []
    needed = {c.key for c in cols}
    whole = all(line.keys() >= needed for line in lines)  # no line leaves a field out
    for column in cols:
        key, default = column.key, column.default
        if whole:
            values = list(map(itemgetter(key), lines))
        elif kind == "records" and key == "tier":
            values = [_given(kind, column, line) for line in lines]
        else:
            values = [line.get(key, default) for line in lines]
        if column.kind == "json":
            values = [_json_text(v) for v in values]
        by_column.append(values)
    return list(zip(*by_column, strict=True))


def _json_text(value: Any) -> str | None:
    """``json.dumps(value)``, None for None; empty lists and objects (most tags and
    metadata) without the encoder."""
    if value is None:
        return None
    if not value and type(value) in (list, dict):
        return "[]" if type(value) is list else "{}"
    return json.dumps(value)


def _given(kind: str, column: Column, line: dict[str, Any]) -> Any:
    """The line's value, or the column's default when it leaves it out (an export written
    before schema 3 has no governance fields: its memories take tier-by-type)."""
    if column.key in line:
        return line[column.key]
    if kind == "records" and column.key == "tier":
        return TIER_OF_TYPE.get(line.get("type", ""), Tier.SEMANTIC).value
    return column.default


def export_meta(odb: OrchestratorDB) -> dict[str, Any]:
    """Schema version, last migration time and the embedder of most vectors (or "")."""
    meta = dict(odb.sql("SELECT key, value FROM meta WHERE key IN "
                        "('schema_version', 'last_migrated_at')"))
    embedder = odb.sql("SELECT embedder FROM memory_embeddings GROUP BY embedder "
                       "ORDER BY count(*) DESC, embedder LIMIT 1")
    return {"schema_version": int(meta.get("schema_version", 0)),
            "last_migrated_at": meta.get("last_migrated_at", ""),
            "embedder_version": embedder[0][0] if embedder else ""}


def vector_rows(odb: OrchestratorDB, left_out: set[str]) -> Iterator[dict[str, Any]]:
    """Each live memory's stored vector for ``vectors.jsonl``
    (models/portability/export_vectors.py), sorted by memoryId, the vector as base64 of its
    float32 bytes (inside ``odb.read()``)."""
    for memory_id, embedder, dim, blob in odb.sql(
            "SELECT e.memory_id, e.embedder, e.dim, e.vector FROM memory_embeddings e "
            f"JOIN memories m ON m.memory_id = e.memory_id WHERE {live('m')} "
            "ORDER BY e.memory_id"):
        if memory_id not in left_out:
            yield {"dim": dim, "embedder": embedder, "memoryId": memory_id,
                   "vector": base64.b64encode(bytes(blob)).decode("ascii")}
