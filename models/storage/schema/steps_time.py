"""Schema 4: time on every memory (``valid_from``, ``valid_to``, ``time_refs``).

Three nullable columns at the end of ``memories``, written exactly as Peewee declares
them in a new file, so a migrated file's ``sqlite_master`` text is a new file's.

What ``up`` fills in for the rows already there:

- ``valid_from`` stays NULL: "true since it was said" (readers use ``createdAt``,
  models/core/validity.py). Nothing better is known, and NULL keeps that visible.
- ``valid_to`` of a superseded memory: the time its successor (the newest memory
  whose ``Updates`` edge points at it) was said, never before its own createdAt, as a
  supersede of this release sets it (validity_columns.close_window). Active memories
  stay open.
- ``time_refs``: the dated phrases of the content, resolved against createdAt
  (models/language/timeexpr.py), as an insert of this release does.

So a file taken down to schema 3 and up again answers as before. ``down`` drops
exactly the three columns.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from orchmem.models.core.shapes import parse_ts
from orchmem.models.language.timeexpr import resolve

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

VERSION = 4
#: Rows read per batch when the dated phrases are filled in.
BATCH = 2000

_COLUMNS = (('"valid_from"', "VARCHAR(255)"), ('"valid_to"', "VARCHAR(255)"),
            ('"time_refs"', "TEXT"))
_CLOSE_SUPERSEDED = """
UPDATE memories SET valid_to = (
    SELECT max(memories.created_at, min(coalesce(n.valid_from, n.created_at)))
    FROM memory_edges AS e JOIN memories AS n ON n.memory_id = e.from_memory_id
    WHERE e.to_memory_id = memories.memory_id AND e.edge_type = 'Updates')
WHERE status = 'superseded' AND valid_to IS NULL"""
_ROWS = ("SELECT id, content, created_at FROM memories WHERE id > ? AND forgotten = 0 "
         "ORDER BY id LIMIT ?")


def up(odb: OrchestratorDB) -> None:
    """Add the three columns and fill them in for the rows already there."""
    for name, kind in _COLUMNS:
        odb.db.execute_sql(f'ALTER TABLE "memories" ADD COLUMN {name} {kind}')
    odb.db.execute_sql(_CLOSE_SUPERSEDED)
    last = 0
    while rows := odb.db.execute_sql(_ROWS, (last, BATCH)).fetchall():
        found = [(json.dumps([r.dump() for r in refs]), rowid)
                 for rowid, content, created in rows
                 if (refs := resolve(content, parse_ts(created)))]
        if found:
            odb.db.cursor().executemany("UPDATE memories SET time_refs = ? WHERE id = ?", found)
        last = rows[-1][0]


def down(odb: OrchestratorDB) -> None:
    """Drop the three columns (what they held is lost: schema 3 has no place for it)."""
    for name, _ in reversed(_COLUMNS):
        odb.db.execute_sql(f'ALTER TABLE "memories" DROP COLUMN {name}')
