"""Moving memories to the current embedder: find stale vectors, embed a batch, store it."""

from __future__ import annotations

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.search.vectors import count_stale, stale, store_embeddings
from orchmem.models.telemetry import meters


def remaining(odb: OrchestratorDB, embedder_version: str) -> int:
    """Memories whose vector is missing or was made by another embedder."""
    return count_stale(odb, embedder_version)


def reembed_batch(odb: OrchestratorDB, embedder: Embedder, batch_size: int) -> int:
    """Embed up to ``batch_size`` stale memories (oldest first); returns how many.

    The model runs outside any transaction; the vectors commit in one. Only the
    worker that owns the orchestrator calls this, so the rows cannot change between
    the read and the write. ``orchmem.reembed.memories`` counts them by outcome.
    """
    rows = stale(odb, embedder.version, batch_size)
    if not rows:
        return 0
    try:
        matrix = embedder.encode([content for _, content in rows])
        with odb.write():
            done = store_embeddings(zip([m for m, _ in rows], matrix, strict=True),
                                    embedder.version)
    except Exception:
        meters.reembedded("failed", len(rows))
        raise
    meters.reembedded("embedded", done)
    return done
