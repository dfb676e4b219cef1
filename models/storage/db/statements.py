"""Fixed SQL text on the bound connection: the write path's prepared statements.

Building a Peewee query costs far more than SQLite spends running it (a profile of a
batch of write-backs put most of a task in query building). The statements a write
runs for every memory, source, event and receipt are therefore written once, as
constant text: ``sqlite3`` keeps each compiled statement in its per-connection cache,
so running one again only binds its parameters. They run on the database the table
classes are bound to (inside ``odb.write()`` or ``odb.read()``), in the caller's
transaction, with the driver's errors wrapped as everywhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from orchmem.models.storage.schema.tables import MemoryRow


def run(sql: str, params: Sequence[Any] = ()) -> Any:
    """Run ``sql`` on the bound database; returns the cursor (``fetchall``, ``rowcount``,
    ``lastrowid``). Call inside a bound block."""
    return MemoryRow._meta.database.execute_sql(sql, params)


def run_many(sql: str, rows: Iterable[Sequence[Any]]) -> None:
    """Run ``sql`` once per row of parameters (``executemany``), inside a bound block
    (whose ``sqlite_errors`` turns a driver error into ours)."""
    MemoryRow._meta.database.cursor().executemany(sql, rows)


def placeholders(count: int) -> str:
    """``?, ?, …`` for an ``IN (…)`` list or a VALUES row of ``count`` values."""
    return ", ".join("?" * count)
