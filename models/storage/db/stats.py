"""Counts and sizes of one orchestrator's memory, for ``orchmem stats``."""

from __future__ import annotations

import json
import logging
from typing import Any

from peewee import JOIN

from orchmem.models.core.governance_fields import Scope, Sensitivity, Tier
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.db.degraded import degraded_info
from orchmem.models.storage.execlog.watermark import projection_status
from orchmem.models.storage.memories.retention_reads import last_run
from orchmem.models.storage.memories.selection import count_by
from orchmem.models.storage.reflection.units import reflection_stats
from orchmem.models.storage.schema.tables import (
    DeadLetterRow,
    MemoryEdgeRow,
    MemoryEmbeddingRow,
    MemoryEventRow,
    MemoryRow,
    TaskReceiptRow,
    live_rows,
)

logger = logging.getLogger(__name__)

def stats(odb: OrchestratorDB) -> dict[str, Any]:
    """Counts per type and status, embeddings missing, edges, events, receipts, sizes."""
    with odb.read():
        by_type: dict[str, dict[str, int]] = {}
        sql = odb.db.execute_sql
        for memory_type, status, n in sql(
                "SELECT type, status, count(*) FROM memories GROUP BY type, status"):
            by_type.setdefault(memory_type, {})[status] = n
        by_status: dict[str, int] = {}
        for counts in by_type.values():
            for status, n in counts.items():
                by_status[status] = by_status.get(status, 0) + n
        missing = (MemoryRow.select(MemoryRow.id)
                   .join(MemoryEmbeddingRow, on=(MemoryEmbeddingRow.memory == MemoryRow.memory_id),
                         join_type=JOIN.LEFT_OUTER)
                   .where(MemoryEmbeddingRow.memory.is_null(), live_rows())
                   .count())
        last_event = MemoryEventRow.select().order_by(MemoryEventRow.id.desc()).first()
        last_ingest = sql("SELECT max(at) FROM ingest_manifest").fetchone()[0]
        return {
            "orchestratorId": odb.orchestrator_id,
            "memories": sum(by_status.values()),
            "byStatus": by_status,
            "byType": by_type,
            "edges": MemoryEdgeRow.select().count(),
            "embeddingsMissing": missing,
            "embedders": dict(sql(
                "SELECT embedder, count(*) FROM memory_embeddings GROUP BY embedder")),
            "events": MemoryEventRow.select().count(),
            "lastEventAt": last_event.at if last_event else None,
            "lastIngestAt": last_ingest,
            "lastBulletinAt": _bulletin_time(odb.workspace.bulletins_dir / "latest.json"),
            "receipts": TaskReceiptRow.select().count(),
            "deadLetters": DeadLetterRow.select().count(),
            "dbBytes": odb.workspace.db_path.stat().st_size,
            "walBytes": _size(odb.workspace.db_path.with_name("memory.db-wal")),
            "degraded": degraded_info(odb.workspace),
            "watermark": projection_status(odb),
            **reflection_stats(odb),
            "governance": governance_counts(odb),
        }


def governance_counts(odb: OrchestratorDB) -> dict[str, Any]:
    """Live memories by tier, scope and sensitivity, and the last retention run."""
    return {"byTier": count_by(odb, "tier", [t.value for t in Tier]),
            "byScope": count_by(odb, "scope", [s.value for s in Scope]),
            "bySensitivity": count_by(odb, "sensitivity", [s.value for s in Sensitivity]),
            "lastRetention": last_run(odb)}


def _bulletin_time(path: Any) -> str | None:
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["generatedAt"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _size(path: Any) -> int:
    try:
        return int(path.stat().st_size)
    except OSError:
        return 0
