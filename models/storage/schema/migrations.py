"""Bringing a memory.db written by an earlier release up to :data:`SCHEMA_VERSION`.

``MIGRATIONS`` lists the numbered steps in order: step ``n`` turns a version ``n - 1``
file into a version ``n`` one. A writer's registry runs the steps a file still needs
when it opens it (:func:`migrate`; ``orchmem migrate`` does the same on demand):

1. a backup first (``memory/backups/memory-<time>-premigrate-v<n>.db``, backup.py);
2. every step in ONE IMMEDIATE transaction, which reads the version again under the
   write lock (two writers opening the same old file run the steps once);
3. a check inside that transaction: ``integrity_check``, the FTS index's own
   integrity check, the row counts of memories, sources, edges, events and vectors
   unchanged, and a sample recall (sample_recall.py: a few memories found by their own
   words, read back with their content and sources, their vectors decoding);
4. ``schema_version`` and ``last_migrated_at`` written, then the commit.

A crash anywhere leaves the old version (the transaction never committed) or the new
one; the next open finishes the job. A failing step or check rolls everything back,
the backup is restored over the file (belt and braces: it is the same content), and
the orchestrator is marked degraded (degraded.py): reads work, writes are refused
until ``orchmem migrate`` succeeds. Re-running on a current file does nothing.

Every step is reversible: a :class:`Step` has an ``up`` and a ``down`` that exactly
undoes it (drops what ``up`` added; rows of the kept tables are never dropped).
:func:`downgrade` runs the ``down`` steps newest first, with the same backup, single
transaction and check, so a file can go back to an earlier release (``orchmem migrate
--to N``, with the workers stopped: the next writer of this release migrates it up
again). The tests build every older file this way and compare it with the schema that
release really wrote (tests/data/), less the one table a down step adds: schema 3's
down step keeps the governance columns it drops in ``governance_kept``, which its up
step reads back, so a round trip restores every memory's governance exactly
(governance_kept.py). A step whose older schema cannot govern what the file holds names
it (``Step.loses``): :func:`downgrade` refuses to go below it unless forced, since the
older release serves those memories to everyone whatever the side table keeps.

A step's DDL is written out here as that release had it, not taken from the table
classes: the classes describe the newest schema, a step must keep describing its own.
Readers never migrate (their files are opened read-only); the storage reads that use
a newer table fall back to what the older schema had (``events.naming``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import peewee

from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.storage.db.backup import restore_backup, take_backup
from orchmem.models.storage.db.degraded import mark_degraded
from orchmem.models.storage.schema import (
    governance_kept,
    sample_recall,
    steps_log,
    steps_rows,
    steps_time,
)
from orchmem.models.storage.schema.steps_governance import downgrade_from_3, upgrade_to_3
from orchmem.models.storage.schema.steps_reflect import downgrade_from_6, upgrade_to_6
from orchmem.models.storage.schema.tables import (
    META_LAST_MIGRATED_AT,
    META_SCHEMA_VERSION,
    SCHEMA_VERSION,
    MetaRow,
)
from orchmem.models.telemetry import meters

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

logger = logging.getLogger(__name__)

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


def downgrade_from_2(odb: OrchestratorDB) -> None:
    """Schema 1 had no ``memory_event_ids`` (its index goes with it)."""
    odb.db.execute_sql('DROP TABLE IF EXISTS "memory_event_ids"')


@dataclass(frozen=True)
class Step:
    """``up`` turns a ``version - 1`` file into a ``version`` one; ``down`` undoes it."""

    version: int
    up: Callable[[OrchestratorDB], None]
    down: Callable[[OrchestratorDB], None]
    #: What a file below ``version`` could not keep safe, or None (checked before a
    #: downgrade past this step, which is refused unless forced).
    loses: Callable[[OrchestratorDB], str | None] | None = None


#: The steps in ascending order; the last version is SCHEMA_VERSION.
MIGRATIONS: list[Step] = [
    Step(2, upgrade_to_2, downgrade_from_2),
    Step(3, upgrade_to_3, downgrade_from_3, governance_kept.what_would_be_lost),
    Step(4, steps_time.up, steps_time.down),  # time on memories
    Step(steps_log.VERSION, steps_log.up, steps_log.down),
    Step(6, upgrade_to_6, downgrade_from_6),
    Step(steps_rows.VERSION, steps_rows.up, steps_rows.down),  # recall's row cache
]


def schema_version() -> int:
    """The version recorded in ``meta`` (inside a bound block; 0 when none is)."""
    row = MetaRow.get_or_none(MetaRow.key == META_SCHEMA_VERSION)
    return int(row.value) if row is not None else 0


def pending(odb: OrchestratorDB) -> list[int]:
    """The step versions ``odb``'s file still needs (empty when current)."""
    with odb.bound():
        current = schema_version()
    return [step.version for step in MIGRATIONS if step.version > current]


#: Tables whose rows a migration must keep, one for one.
_KEPT = ("memories", "memory_sources", "memory_edges", "memory_events", "memory_embeddings")


#: Kept tables that did not exist yet at an older version (none so far: every table of
#: _KEPT is in schema 1). A step that adds one names it here for the versions before it.
_KEPT_BELOW: dict[int, tuple[str, ...]] = {}


def _counts(odb: OrchestratorDB, tables: tuple[str, ...] = _KEPT) -> dict[str, int]:
    return {t: int(odb.db.execute_sql(f"SELECT count(*) FROM {t}").fetchone()[0])
            for t in tables}


def check_migrated(odb: OrchestratorDB, before: dict[str, int]) -> None:
    """Inside the migration's transaction: integrity, FTS, row counts and a sample
    recall; raises MigrationFailed naming what is wrong."""
    problems = [str(r[0]) for r in odb.db.execute_sql("PRAGMA integrity_check") if r[0] != "ok"]
    try:
        odb.db.execute_sql("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")
    except peewee.DatabaseError as exc:
        problems.append(f"memory_fts: {exc}")
    after = _counts(odb, tuple(before))
    problems += [f"{t}: {before[t]} rows before, {after[t]} after" for t in before
                 if before[t] != after[t]]
    if not problems:
        problems += sample_recall.problems(odb)
    if problems:
        raise MigrationFailed("; ".join(problems[:5]))


class MigrationFailed(Exception):
    """A step or the check after it failed (the transaction is rolled back)."""


class DowngradeRefused(Exception):
    """A downgrade would leave memories the older schema cannot govern (nothing was
    changed; ``force`` goes ahead)."""


def _run_steps(odb: OrchestratorDB) -> tuple[int, list[int]]:
    """The one transaction: (version found under the lock, versions applied)."""
    applied: list[int] = []
    with odb.write():
        current = schema_version()
        before = _counts(odb)
        for step in MIGRATIONS:
            if step.version > current:
                step.up(odb)
                applied.append(step.version)
        if applied:
            check_migrated(odb, before)
            _record_version(applied[-1])
    return current, applied


def _record_version(version: int) -> None:
    for key, value in ((META_SCHEMA_VERSION, str(version)),
                       (META_LAST_MIGRATED_AT, format_ts(utc_now()))):
        MetaRow.insert(key=key, value=value).on_conflict_replace().execute()


def migrate(odb: OrchestratorDB) -> list[int]:
    """Run the steps a writer's ``odb`` still needs; returns the versions applied (empty
    when the file was current, or when it failed: then ``odb``'s orchestrator is
    degraded, and its writes raise MemoryDegraded). Raises StorageError when the backup
    cannot be taken (nothing was changed)."""
    todo = pending(odb)
    if not todo:
        return []
    with odb.bound():
        found = schema_version()
    backup = take_backup(odb, f"premigrate-v{found}")
    meters.migration("started")
    try:
        found, applied = _run_steps(odb)
    except Exception as exc:  # any failure of a step: roll back, restore, degrade
        meters.migration("failed")
        _fail(odb, backup, found, exc)
        return []
    meters.migration("completed")
    for version in applied:
        odb.log.write("schema_migrated", version=version, fromVersion=found,
                      backup=str(backup))
    return applied


def _fail(odb: OrchestratorDB, backup: Path, found: int, exc: Exception) -> None:
    odb.close()
    restore_backup(odb.workspace, backup, odb.settings.worker.busy_timeout_ms)
    reason = (f"the migration from schema {found} to {SCHEMA_VERSION} failed "
              f"({type(exc).__name__}: {exc}); the file was restored from {backup}")
    mark_degraded(odb.workspace, reason, backup=str(backup), fromVersion=found,
                  toVersion=SCHEMA_VERSION)
    odb.log.write("migration_failed", error=str(exc)[:500], backup=str(backup),
                  fromVersion=found, toVersion=SCHEMA_VERSION)
    logger.error("memory of %s is degraded: %s", odb.orchestrator_id, reason)


def downgrade(odb: OrchestratorDB, to_version: int, *, force: bool = False) -> list[int]:
    """Undo the steps above ``to_version`` on a writer's ``odb`` (opened without
    migrating), newest first, after a backup and in one checked transaction; returns
    the versions undone (empty when the file is already at or below ``to_version``).
    Raises DowngradeRefused when a step undone names what the older schema would lose
    and ``force`` is not set, MigrationFailed (nothing changed either way) or
    ValueError for an unknown version."""
    if not 1 <= to_version <= SCHEMA_VERSION:
        raise ValueError(f"schema version {to_version} is not between 1 and {SCHEMA_VERSION}")
    with odb.bound():
        found = schema_version()
    if found <= to_version:
        return []
    undoing = [s for s in reversed(MIGRATIONS) if to_version < s.version <= found]
    if not force:
        _refuse_losses(odb, undoing, to_version)
    backup = take_backup(odb, f"predowngrade-v{found}")
    with odb.write():
        before = _counts(odb, _KEPT_BELOW.get(to_version, _KEPT))
        for step in undoing:
            step.down(odb)
        check_migrated(odb, before)
        _record_version(to_version)
    odb.log.write("schema_downgraded", version=to_version, fromVersion=found,
                  backup=str(backup), forced=force)
    return [step.version for step in undoing]


def _refuse_losses(odb: OrchestratorDB, undoing: list[Step], to_version: int) -> None:
    """Raise DowngradeRefused naming what the steps in ``undoing`` would lose."""
    with odb.read():
        lost = [text for step in undoing if step.loses is not None
                for text in [step.loses(odb)] if text]
    if lost:
        raise DowngradeRefused(
            "; ".join(lost) + f". Going down to schema {to_version} anyway needs force "
            "(orchmem migrate --to N --force); this release restores what the file held "
            "when it migrates the file up again")
