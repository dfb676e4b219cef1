"""Moving memories to the current embedder: find stale vectors, embed a batch, store it."""

from __future__ import annotations

from .embedding import Embedder
from .storage.database import OrchestratorDB
from .storage.vectors import store_embeddings

_STALE = """
    FROM memories m LEFT JOIN memory_embeddings e ON e.memory_id = m.memory_id
    WHERE m.forgotten = 0 AND (e.memory_id IS NULL OR e.embedder != ?)
"""


def remaining(odb: OrchestratorDB, embedder_version: str) -> int:
    """Memories whose vector is missing or was made by another embedder."""
    with odb.bound():
        return int(odb.db.execute_sql(f"SELECT count(*) {_STALE}",
                                      (embedder_version,)).fetchone()[0])


def reembed_batch(odb: OrchestratorDB, embedder: Embedder, batch_size: int) -> int:
    """Embed up to ``batch_size`` stale memories (oldest first); returns how many.

    The model runs outside any transaction; the vectors commit in one. Only the
    worker that owns the orchestrator calls this, so the rows cannot change between
    the read and the write.
    """
    with odb.bound():
        rows = odb.db.execute_sql(f"SELECT m.memory_id, m.content {_STALE} ORDER BY m.id LIMIT ?",
                                  (embedder.version, batch_size)).fetchall()
    if not rows:
        return 0
    matrix = embedder.encode([content for _, content in rows])
    with odb.write():
        return store_embeddings(zip([m for m, _ in rows], matrix, strict=True), embedder.version)
