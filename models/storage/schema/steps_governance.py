"""Schema 3: the governance columns of ``memories`` (tier, scope, session, project,
sensitivity, tags, metadata), and the step back.

Up adds the columns at the end of the table, written exactly as Peewee writes them for
a new file (so a migrated file's ``sqlite_master`` text is a new file's), then gives
every existing memory the tier of its type, then puts back what the down step kept
(governance_kept.py): a memory that went down with this release comes back with its
governance exactly; one without kept governance reads as tier-by-type, global,
internal (restricted when the secret detector flags its text), no tags, no metadata.
Down keeps every memory's governance in the side table, then drops the same columns.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from orchmem.config.governance import SECRET_RULES
from orchmem.models.core.governance_fields import TIER_OF_TYPE
from orchmem.models.storage.schema import governance_kept

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

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
    """Add the governance columns, set each old memory's tier from its type, then
    restore the kept governance and restrict the secrets of the rest."""
    # this connection may have read the old file through reader_view's TEMP view
    odb.db.execute_sql("DROP VIEW IF EXISTS temp.memories")
    odb.db.execute_sql(f'DROP TABLE IF EXISTS temp."{governance_kept.READER_COPY}"')
    for _, ddl in COLUMNS:
        odb.db.execute_sql(f'ALTER TABLE main."memories" ADD COLUMN {ddl}')
    odb.db.execute_sql(_tier_backfill())
    governance_kept.restore(odb)


def downgrade_from_3(odb: OrchestratorDB) -> None:
    """Keep every memory's governance in the side table, then drop the governance
    columns (exactly what :func:`upgrade_to_3` added); the connection reads on through
    :func:`reader_view` (a TEMP view: not in the file)."""
    governance_kept.keep(odb)
    for column, _ in reversed(COLUMNS):
        odb.db.execute_sql(f'ALTER TABLE main."memories" DROP COLUMN "{column}"')
    # this connection goes on reading the older file (the downgrade's own check does)
    reader_view(odb)


def reader_view(odb: OrchestratorDB) -> bool:
    """:func:`legacy_view` on ``odb``'s current connection (after a downgrade)."""
    return legacy_view(odb.db.connection(), odb.db.secret_rules)


def legacy_view(conn: sqlite3.Connection, rules: Sequence[str] = SECRET_RULES) -> bool:
    """On a connection to a file older than schema 3 (a reader's: readers never migrate;
    a degraded one; one just downgraded): a TEMP view named ``memories`` over
    ``main.memories`` that adds the governance columns. A memory the side table kept
    (governance_kept.py) reads with its kept values; any other with the defaults (tier
    by type, global, internal), except that one whose text the secret detector's
    ``rules`` flag reads as restricted: a reader never shows a memory as less sensitive
    than a writer would store it. Unqualified names find the temp schema first, so
    every read works unchanged. Its ``m.*`` comes first: once a writer migrates the
    file, the real columns win (SQLite renames the view's own to ``scope:1``...), so a
    memory written restricted later is never read as internal. Runs on every new
    connection (database.GuardedSqliteDatabase); returns True when it made the view."""
    try:
        columns = {r[1] for r in conn.execute('PRAGMA main.table_info("memories")')}
        if not columns or "tier" in columns:
            return False
        governance_kept.copy_for_reader(conn, rules)
        conn.execute(_legacy_view_sql())
    except sqlite3.DatabaseError:
        return False  # a damaged file: opening it reports that (integrity.verify)
    return True


def _legacy_view_sql() -> str:
    cases = " ".join(f"WHEN '{t}' THEN '{tier.value}'" for t, tier in TIER_OF_TYPE.items())
    secret = f"{governance_kept.SECRET_FUNCTION}(m.content, m.summary)"
    return (
        "CREATE TEMP VIEW IF NOT EXISTS memories AS SELECT m.*, "
        f"COALESCE(k.tier, CASE m.type {cases} ELSE 'semantic' END) AS tier, "
        "COALESCE(k.scope, 'global') AS scope, k.session_id AS session_id, "
        "k.project_id AS project_id, "
        f"COALESCE(k.sensitivity, CASE WHEN {secret} THEN 'restricted' "
        "ELSE 'internal' END) AS sensitivity, "
        "COALESCE(k.tags, '[]') AS tags, COALESCE(k.metadata, '{}') AS metadata "
        f'FROM main.memories AS m LEFT JOIN temp."{governance_kept.READER_COPY}" AS k '
        "ON k.memory_id = m.memory_id")
