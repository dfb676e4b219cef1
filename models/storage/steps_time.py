"""Schema 4: time on every memory (``valid_from``, ``valid_to``, ``time_refs``).

Three nullable columns at the end of ``memories``, written exactly as Peewee declares
them in a new file, so a migrated file's ``sqlite_master`` text is a new file's.
Rows written before schema 4 keep NULL in all three: ``valid_from`` NULL means "true
since it was stored" (readers use ``createdAt``, models/validity.py), ``valid_to``
NULL "still true", ``time_refs`` NULL "not scanned" (nothing is rewritten: a
migration must not change what an old file says). ``down`` drops exactly the three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .database import OrchestratorDB

VERSION = 4

_COLUMNS = (('"valid_from"', "VARCHAR(255)"), ('"valid_to"', "VARCHAR(255)"),
            ('"time_refs"', "TEXT"))


def up(odb: OrchestratorDB) -> None:
    """Add the three columns (NULL on every existing row)."""
    for name, kind in _COLUMNS:
        odb.db.execute_sql(f'ALTER TABLE "memories" ADD COLUMN {name} {kind}')


def down(odb: OrchestratorDB) -> None:
    """Drop the three columns (what they held is lost: a downgrade goes to a schema
    that has no place for it)."""
    for name, _ in reversed(_COLUMNS):
        odb.db.execute_sql(f'ALTER TABLE "memories" DROP COLUMN {name}')
