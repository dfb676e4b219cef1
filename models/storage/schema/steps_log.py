"""Migration step 5: the execution log, runs and episodes (logtables.py).

``up`` creates the tables, indexes, the episodes' FTS table and its triggers, written
out as Peewee creates them in a new file (so a migrated file's schema is the same text
as a new one's); ``down`` drops exactly those. Nothing that existed before is touched:
an older file simply has no log yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchmem.models.storage.schema.logtables import EPISODE_FTS_DDL

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

VERSION = 5

_TABLES = (
    'CREATE TABLE IF NOT EXISTS "log_runs" ("run_id" VARCHAR(255) NOT NULL PRIMARY KEY, '
    '"name" VARCHAR(255), "conversation_id" VARCHAR(255), "replay" INTEGER NOT NULL, '
    '"status" VARCHAR(255) NOT NULL, "outcome" VARCHAR(255), '
    '"started_at" VARCHAR(255) NOT NULL, "ended_at" VARCHAR(255), '
    '"first_seq" INTEGER NOT NULL, "last_seq" INTEGER NOT NULL, "events" INTEGER NOT NULL, '
    '"projected_seq" INTEGER NOT NULL, "schema_version" INTEGER NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "log_runs_status" ON "log_runs" ("status")',
    'CREATE TABLE IF NOT EXISTS "log_events" ("seq" INTEGER NOT NULL PRIMARY KEY, '
    '"event_id" VARCHAR(255) NOT NULL, "idempotency_key" VARCHAR(255) NOT NULL, '
    '"run_id" VARCHAR(255) NOT NULL, "step_id" VARCHAR(255), "span_id" VARCHAR(255), '
    '"parent_id" VARCHAR(255), "kind" VARCHAR(255) NOT NULL, "name" VARCHAR(255), '
    '"status" VARCHAR(255), "actor" VARCHAR(255), "digest" VARCHAR(255), "text" TEXT, "data" TEXT, '
    '"checkpoint_ref" TEXT, "checkpoint_schema" INTEGER, "parent_checkpoint_id" VARCHAR(255), '
    '"replay" INTEGER NOT NULL, "schema_version" INTEGER NOT NULL, '
    '"task_key" VARCHAR(255) NOT NULL, "at" VARCHAR(255) NOT NULL, '
    '"recorded_at" VARCHAR(255) NOT NULL)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "log_events_event_id" ON "log_events" ("event_id")',
    'CREATE INDEX IF NOT EXISTS "log_events_recorded_at" ON "log_events" ("recorded_at")',
    'CREATE INDEX IF NOT EXISTS "log_events_run_id_seq" ON "log_events" ("run_id", "seq")',
    'CREATE TABLE IF NOT EXISTS "episodes" ("id" INTEGER NOT NULL PRIMARY KEY, '
    '"episode_id" VARCHAR(255) NOT NULL, "run_id" VARCHAR(255) NOT NULL, '
    '"title" TEXT NOT NULL, "summary" TEXT NOT NULL, "participants" TEXT NOT NULL, '
    '"tools" TEXT NOT NULL, "outcome" VARCHAR(255), "started_at" VARCHAR(255) NOT NULL, '
    '"ended_at" VARCHAR(255), "first_seq" INTEGER NOT NULL, "last_seq" INTEGER NOT NULL, '
    '"events" INTEGER NOT NULL, "memories" INTEGER NOT NULL, '
    '"summarizer" VARCHAR(255) NOT NULL, "schema_version" INTEGER NOT NULL, '
    '"updated_at" VARCHAR(255) NOT NULL)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "episodes_episode_id" ON "episodes" ("episode_id")',
    'CREATE UNIQUE INDEX IF NOT EXISTS "episodes_run_id" ON "episodes" ("run_id")',
    'CREATE TABLE IF NOT EXISTS "episode_memories" ("episode_id" VARCHAR(255) NOT NULL, '
    '"memory_id" VARCHAR(255) NOT NULL, PRIMARY KEY ("episode_id", "memory_id")) '
    'WITHOUT ROWID',
    'CREATE INDEX IF NOT EXISTS "episode_memories_memory_id" '
    'ON "episode_memories" ("memory_id")',
)

_DROP = (
    "DROP TRIGGER IF EXISTS episodes_fts_insert",
    "DROP TRIGGER IF EXISTS episodes_fts_delete",
    "DROP TRIGGER IF EXISTS episodes_fts_update",
    "DROP TABLE IF EXISTS episode_fts",
    'DROP TABLE IF EXISTS "episode_memories"',
    'DROP TABLE IF EXISTS "episodes"',
    'DROP TABLE IF EXISTS "log_events"',
    'DROP TABLE IF EXISTS "log_runs"',
)


def up(odb: OrchestratorDB) -> None:
    """Create the log's tables, indexes, FTS table and triggers."""
    for statement in (*_TABLES, *EPISODE_FTS_DDL):
        odb.db.execute_sql(statement)


def down(odb: OrchestratorDB) -> None:
    """Drop everything :func:`up` created (the log's rows go with it)."""
    for statement in _DROP:
        odb.db.execute_sql(statement)
