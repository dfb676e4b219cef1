"""Migration step 7: the change counter of the rows recall caches (row_cache.py).

``up`` creates the triggers that bump ``meta.rows_seq`` on every insert, update and
delete of ``memories``, ``memory_edges`` and ``memory_sources``, written out as a new
file has them, and the counter itself (a random start: tables.rows_seq_start);
``down`` drops exactly those. No row of any other table is touched. A file below
schema 7 has no counter, and its readers use no cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchmem.models.storage.schema.tables import (
    META_ROWS_SEQ,
    ROWS_SEQ_DDL,
    ROWS_SEQ_TRIGGERS,
    rows_seq_start,
)

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

VERSION = 7


def up(odb: OrchestratorDB) -> None:
    """Create the counter and its triggers."""
    for statement in ROWS_SEQ_DDL:
        odb.db.execute_sql(statement)
    odb.db.execute_sql("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                       (META_ROWS_SEQ, rows_seq_start()))


def down(odb: OrchestratorDB) -> None:
    """Drop the triggers and the counter."""
    for name in ROWS_SEQ_TRIGGERS:
        odb.db.execute_sql(f"DROP TRIGGER IF EXISTS {name}")
    odb.db.execute_sql("DELETE FROM meta WHERE key = ?", (META_ROWS_SEQ,))
