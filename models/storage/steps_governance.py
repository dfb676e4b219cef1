"""Schema 3: the governance columns of ``memories`` (tier, scope, session, project,
sensitivity, tags, metadata), and the step back.

Up adds the columns at the end of the table, written exactly as Peewee writes them for
a new file (so a migrated file's ``sqlite_master`` text is a new file's), then gives
every existing memory the tier of its type: a memory written before schema 3 reads as
tier-by-type, global, internal, no tags, no metadata. Down drops the same columns.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ..governance import TIER_OF_TYPE

if TYPE_CHECKING:
    from .database import OrchestratorDB

#: (column, its DDL as Peewee writes it), in table order.
COLUMNS = (
    ("tier", "\"tier\" VARCHAR(255) NOT NULL DEFAULT 'semantic'"),
    ("scope", "\"scope\" VARCHAR(255) NOT NULL DEFAULT 'global'"),
    ("session_id", '"session_id" VARCHAR(255)'),
    ("project_id", '"project_id" VARCHAR(255)'),
    ("sensitivity", "\"sensitivity\" VARCHAR(255) NOT NULL DEFAULT 'internal'"),
    ("tags", "\"tags\" TEXT NOT NULL DEFAULT '[]'"),
    ("metadata", "\"metadata\" TEXT NOT NULL DEFAULT '{}'"),
)


def _tier_backfill() -> str:
    cases = " ".join(f"WHEN '{t}' THEN '{tier.value}'" for t, tier in TIER_OF_TYPE.items())
    return f"UPDATE main.memories SET tier = CASE type {cases} ELSE 'semantic' END"


def upgrade_to_3(odb: OrchestratorDB) -> None:
    """Add the governance columns and set each old memory's tier from its type."""
    # this connection may have read the old file through reader_view's TEMP view
    odb.db.execute_sql("DROP VIEW IF EXISTS temp.memories")
    for _, ddl in COLUMNS:
        odb.db.execute_sql(f'ALTER TABLE main."memories" ADD COLUMN {ddl}')
    odb.db.execute_sql(_tier_backfill())


def downgrade_from_3(odb: OrchestratorDB) -> None:
    """Drop the governance columns (exactly what :func:`upgrade_to_3` added); the
    connection reads on through :func:`reader_view` (a TEMP view: not in the file)."""
    for column, _ in reversed(COLUMNS):
        odb.db.execute_sql(f'ALTER TABLE main."memories" DROP COLUMN "{column}"')
    # this connection goes on reading the older file (the downgrade's own check does)
    reader_view(odb)


def reader_view(odb: OrchestratorDB) -> bool:
    """:func:`legacy_view` on ``odb``'s current connection (after a downgrade)."""
    return legacy_view(odb.db.connection())


def legacy_view(conn: sqlite3.Connection) -> bool:
    """On a connection to a file older than schema 3 (a reader's: readers never migrate;
    a degraded one; one just downgraded): a TEMP view named ``memories`` over
    ``main.memories`` that adds the governance columns with their defaults (tier by
    type, global, internal). Unqualified names find the temp schema first, so every
    read works unchanged. Its ``*`` comes first: once a writer migrates the file, the
    real columns win (SQLite renames the view's own to ``scope:1``...), so a memory
    written restricted later is never read as internal. Runs on every new connection
    (database.GuardedSqliteDatabase); returns True when it made the view."""
    try:
        columns = {r[1] for r in conn.execute('PRAGMA main.table_info("memories")')}
        if not columns or "tier" in columns:
            return False
        cases = " ".join(f"WHEN '{t}' THEN '{tier.value}'" for t, tier in TIER_OF_TYPE.items())
        conn.execute(
            "CREATE TEMP VIEW IF NOT EXISTS memories AS SELECT *, "
            f"CASE type {cases} ELSE 'semantic' END AS tier, 'global' AS scope, "
            "NULL AS session_id, NULL AS project_id, 'internal' AS sensitivity, "
            "'[]' AS tags, '{}' AS metadata FROM main.memories")
    except sqlite3.DatabaseError:
        return False  # a damaged file: opening it reports that (integrity.verify)
    return True
