"""Bringing a memory.db written by an earlier release up to :data:`SCHEMA_VERSION`.

``MIGRATIONS`` lists the numbered steps in order: step ``n`` turns a version ``n - 1``
file into a version ``n`` one. A writer's registry runs the steps a file still needs
when it opens it (:func:`migrate`); each step is one IMMEDIATE transaction that reads
the version again under the write lock, changes the schema and sets
``meta.schema_version`` to ``n``, so a crash leaves the file at ``n - 1`` or ``n``,
and two writers opening the same old file at once run each step once.

A step's DDL is written out here as that release had it, not taken from the table
classes: the classes describe the newest schema, a step must keep describing its own.
Readers never migrate (their files are opened read-only); the storage reads that use
a newer table fall back to what the older schema had (``events.naming``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .tables import META_SCHEMA_VERSION, MetaRow

if TYPE_CHECKING:
    from .database import OrchestratorDB

#: Schema 2: the audit events indexed by memory id, backfilled from their JSON lists.
_UPGRADE_TO_2 = (
    # Written exactly as Peewee creates the table in a new file, so a migrated file's
    # schema is the same text as a new one's.
    'CREATE TABLE IF NOT EXISTS "memory_event_ids" ("memory_id" VARCHAR(255) NOT NULL, '
    '"event_id" INTEGER NOT NULL, PRIMARY KEY ("memory_id", "event_id"), '
    'FOREIGN KEY ("event_id") REFERENCES "memory_events" ("id") ON DELETE CASCADE) '
    "WITHOUT ROWID",
    'CREATE INDEX IF NOT EXISTS "memory_event_ids_event_id" '
    'ON "memory_event_ids" ("event_id")',
    """INSERT OR IGNORE INTO memory_event_ids (memory_id, event_id)
        SELECT ids.value, e.id FROM memory_events AS e, json_each(e.memory_ids) AS ids""",
)


def upgrade_to_2(odb: OrchestratorDB) -> None:
    """Create ``memory_event_ids`` and fill it from every event's ``memory_ids``."""
    for statement in _UPGRADE_TO_2:
        odb.db.execute_sql(statement)


#: (version, step) in ascending order; the last version is SCHEMA_VERSION.
MIGRATIONS: list[tuple[int, Callable[[OrchestratorDB], None]]] = [(2, upgrade_to_2)]


def schema_version() -> int:
    """The version recorded in ``meta`` (inside a bound block; 0 when none is)."""
    row = MetaRow.get_or_none(MetaRow.key == META_SCHEMA_VERSION)
    return int(row.value) if row is not None else 0


def migrate(odb: OrchestratorDB) -> list[int]:
    """Run the steps a writer's ``odb`` still needs; returns the versions applied (empty
    when the file was current). Raises StorageError (nothing of a failed step stays)."""
    applied = []
    with odb.bound():
        current = schema_version()
    for version, step in MIGRATIONS:
        if version <= current:
            continue
        with odb.write():
            if schema_version() >= version:
                continue  # another writer ran this step since we looked
            step(odb)
            MetaRow.insert(key=META_SCHEMA_VERSION, value=str(version)) \
                .on_conflict_replace().execute()
        applied.append(version)
        odb.log.write("schema_migrated", version=version)
    return applied
