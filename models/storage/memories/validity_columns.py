"""The time columns of a memory row (schema 4): what an insert writes, what a supersede
closes, and which columns a read may name.

Writes run inside the caller's write transaction (a writer's file is always current).
A reader may hold a file no writer has migrated yet (readers never migrate): its reads
name only the columns that file has (:func:`memory_fields`, :data:`TIME_COLUMNS_SQL`),
and the time of its memories reads as unknown (None).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from peewee import Field

from orchmem.models.core.shapes import MemoryInput, format_ts, utc_now
from orchmem.models.language.timeexpr import resolve
from orchmem.models.storage.db.statements import run
from orchmem.models.storage.schema.tables import MemoryRow

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

_TIME_NAMES = frozenset({"valid_from", "valid_to", "time_refs"})
_HAS_TIME = "SELECT 1 FROM pragma_table_info('memories') WHERE name = 'valid_from'"
#: The time columns in a SELECT list, for a file that has them and for one that has not.
TIME_COLUMNS_SQL = "valid_from, valid_to, time_refs"
NO_TIME_COLUMNS_SQL = "NULL, NULL, NULL"


def memory_fields() -> list[Field]:
    """The fields of ``MemoryRow`` the bound file has (inside a bound block)."""
    fields = MemoryRow._meta.sorted_fields
    if MemoryRow._meta.database.execute_sql(_HAS_TIME).fetchone() is not None:
        return list(fields)
    return [f for f in fields if f.column_name not in _TIME_NAMES]


def has_time(odb: OrchestratorDB) -> bool:
    """True when ``odb``'s file has the time columns (one small read, no binding).

    The table is asked, not ``meta``: inside a migration's transaction the columns
    come and go before the version is written. Inside a snapshot it is asked once
    (:meth:`OrchestratorDB.memo`): recall read it up to five times."""
    memo = odb.memo()
    if memo is None:
        return bool(odb.sql(_HAS_TIME))
    found = memo.get(_HAS_TIME)
    if found is None:
        found = memo[_HAS_TIME] = bool(odb.sql(_HAS_TIME))
    return bool(found)


def validity_columns(memory: MemoryInput) -> dict[str, Any]:
    """``valid_from``, ``valid_to`` and ``time_refs`` of a new row.

    validFrom is stored only when given (NULL means "since createdAt"); the dated phrases
    of the content are resolved against validFrom, else createdAt, else now.
    """
    anchor = memory.valid_from or memory.created_at or utc_now()
    refs = resolve(memory.content, anchor)
    return {
        "valid_from": format_ts(memory.valid_from) if memory.valid_from else None,
        "valid_to": format_ts(memory.valid_to) if memory.valid_to else None,
        "time_refs": json.dumps([r.dump() for r in refs]) if refs else None,
    }


#: A memory's start and end, for a supersede (fixed text:
#: :mod:`orchmem.models.storage.db.statements`).
_WINDOW = "SELECT valid_from, created_at, valid_to FROM memories WHERE memory_id = ?"


def _start(row: Sequence[Any]) -> str:
    return str(row[0] or row[1])


def close_window(older_id: str, newer_id: str | None) -> str | None:
    """The validTo a supersede gives ``older_id``, or None when it keeps its own.

    The newer memory's start (validFrom, else createdAt), never before the older one's
    own start; without a newer memory (or when it is unknown), now. Inside the
    writer's transaction (its file has the time columns)."""
    older = run(_WINDOW, (older_id,)).fetchone()
    if older is None or older[2] is not None:
        return None
    newer = run(_WINDOW, (newer_id,)).fetchone() if newer_id else None
    closed = _start(newer) if newer is not None else format_ts(utc_now())
    return max(closed, _start(older))
