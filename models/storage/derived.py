"""Dropping the derived data of one orchestrator (the full-text index, the vectors), which
the records rebuild: ``orchmem rebuild``."""

from __future__ import annotations

from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.events import bump_meta
from orchmem.models.storage.schema.tables import FTS_DDL, META_EMBEDDING_DELETES, MemoryEmbeddingRow


def rebuild_fts(odb: OrchestratorDB) -> int:
    """Drop ``memory_fts`` and its triggers, create them again and index every memory from
    ``memories``, in one transaction. Returns the rows indexed."""
    with odb.write():
        for trigger in ("memories_fts_insert", "memories_fts_delete", "memories_fts_update"):
            odb.db.execute_sql(f"DROP TRIGGER IF EXISTS {trigger}")
        odb.db.execute_sql("DROP TABLE IF EXISTS memory_fts")
        for statement in FTS_DDL:
            odb.db.execute_sql(statement)
        # 'rebuild' reads the external content table (memories) again.
        odb.db.execute_sql("INSERT INTO memory_fts(memory_fts) VALUES ('rebuild')")
        return int(odb.db.execute_sql("SELECT count(*) FROM memories").fetchone()[0])


def drop_vectors(odb: OrchestratorDB) -> int:
    """Delete every vector (readers drop their cached matrix); returns how many."""
    with odb.write():
        dropped = int(MemoryEmbeddingRow.delete().execute())
        bump_meta(META_EMBEDDING_DELETES)
        return dropped
