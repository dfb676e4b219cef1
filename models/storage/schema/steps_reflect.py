"""Schema 6: reflection's tables (memory_topics, insights, proposals, crystals).

Written exactly as Peewee creates them in a new file, so a migrated file's schema is
the same text as a new one's. The conflict insights are backfilled from the
Contradicts edges (open while both ends are active, dismissed otherwise); topics,
proposals and crystals are derived data that the next reflection computes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

UP_6 = (
    'CREATE TABLE IF NOT EXISTS "memory_topics" ("memory_id" VARCHAR(255) NOT NULL PRIMARY KEY, '
    '"topic" VARCHAR(255) NOT NULL, FOREIGN KEY ("memory_id") REFERENCES "memories" '
    '("memory_id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "memory_topics_topic" ON "memory_topics" ("topic")',
    'CREATE TABLE IF NOT EXISTS "insights" ("insight_id" VARCHAR(255) NOT NULL PRIMARY KEY, '
    '"kind" VARCHAR(255) NOT NULL, "status" VARCHAR(255) NOT NULL, "memory_ids" TEXT NOT NULL, '
    '"ref" VARCHAR(255), "reason" TEXT, "created_at" VARCHAR(255) NOT NULL, '
    '"updated_at" VARCHAR(255) NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "insights_status_kind_created_at" '
    'ON "insights" ("status", "kind", "created_at")',
    'CREATE TABLE IF NOT EXISTS "proposals" ("proposal_id" VARCHAR(255) NOT NULL PRIMARY KEY, '
    '"relation" VARCHAR(255) NOT NULL, "newer_id" VARCHAR(255) NOT NULL, '
    '"older_id" VARCHAR(255) NOT NULL, "topic" VARCHAR(255), "reason" TEXT NOT NULL, '
    '"confidence" REAL NOT NULL, "fingerprint" VARCHAR(255) NOT NULL, '
    '"status" VARCHAR(255) NOT NULL, "decided_by" VARCHAR(255), "decided_reason" TEXT, '
    '"created_at" VARCHAR(255) NOT NULL, "decided_at" VARCHAR(255))',
    'CREATE UNIQUE INDEX IF NOT EXISTS "proposals_fingerprint" ON "proposals" ("fingerprint")',
    'CREATE INDEX IF NOT EXISTS "proposals_status_created_at" '
    'ON "proposals" ("status", "created_at")',
    'CREATE TABLE IF NOT EXISTS "crystals" ("topic" VARCHAR(255) NOT NULL PRIMARY KEY, '
    '"memory_id" VARCHAR(255) NOT NULL, "units_digest" VARCHAR(255) NOT NULL, '
    '"units" INTEGER NOT NULL, "built_at" VARCHAR(255) NOT NULL)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "crystals_memory_id" ON "crystals" ("memory_id")',
    # The contradiction state of schema 5, carried over as conflict insights.
    """INSERT OR IGNORE INTO insights (insight_id, kind, status, memory_ids, ref, reason,
        created_at, updated_at)
        SELECT 'i-conflict-' || e.edge_id, 'conflict',
            CASE WHEN f.status = 'active' AND t.status = 'active' THEN 'open'
                 ELSE 'dismissed' END,
            json_array(e.from_memory_id, e.to_memory_id), e.edge_id, e.reason,
            e.created_at, e.created_at
        FROM memory_edges e JOIN memories f ON f.memory_id = e.from_memory_id
        JOIN memories t ON t.memory_id = e.to_memory_id
        WHERE e.edge_type = 'Contradicts'""",
)

DOWN_6 = (
    'DROP TABLE IF EXISTS "crystals"',
    'DROP TABLE IF EXISTS "proposals"',
    'DROP TABLE IF EXISTS "insights"',
    'DROP TABLE IF EXISTS "memory_topics"',
)


def upgrade_to_6(odb: OrchestratorDB) -> None:
    """Add the reflection tables; backfill conflict insights."""
    for statement in UP_6:
        odb.db.execute_sql(statement)


def downgrade_from_6(odb: OrchestratorDB) -> None:
    """Exactly undo :func:`upgrade_to_6` (the crystals' memory rows stay: they are
    memories, and a schema-5 file keeps them as such)."""
    for statement in DOWN_6:
        odb.db.execute_sql(statement)
