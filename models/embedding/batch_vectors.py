"""Vectors computed ahead for a batch of tasks: one model call for all their texts.

A batch of write-backs (``orchmem.tasks.batch``) embeds every text it can see in its
payloads at once, inside :func:`ahead`; each task then asks :func:`encode` for its own
texts and gets the rows computed ahead, so the model runs once per batch, at its batch
speed, instead of once per task. A text not computed ahead (an extractor's rewording,
say) is embedded then, as without a batch. Outside :func:`ahead`, :func:`encode` is
``embedder.encode``.

:func:`nearest_ahead` does the same for reconciliation's nearest stored memories: every
candidate of one orchestrator's batch is ranked against its vector index in one matrix
product, before its tasks run, instead of one product per task (each reads the whole
index: at a few thousand memories that was the largest part of a batched task after
the model).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from orchmem.config import EmbeddingError
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.search.vectors import index_for

logger = logging.getLogger(__name__)

_AHEAD: ContextVar[tuple[Embedder, dict[str, np.ndarray]] | None] = ContextVar(
    "orchmem_vectors_ahead", default=None)


@contextmanager
def ahead(embedder: Embedder, texts: Sequence[str]) -> Iterator[int]:
    """Embed ``texts`` (each distinct text once) for the block; yields how many.

    A failure of the model is logged and nothing is computed ahead: each task then
    embeds (and fails, and logs) on its own, as without a batch.
    """
    unique = list(dict.fromkeys(texts))
    vectors: dict[str, np.ndarray] = {}
    if unique:
        try:
            matrix = embedder.encode(unique)
            vectors = dict(zip(unique, matrix, strict=True))
        except EmbeddingError as exc:
            logger.warning("embedding a batch of %d texts failed: %s", len(unique), exc)
    token = _AHEAD.set((embedder, vectors))
    try:
        yield len(vectors)
    finally:
        _AHEAD.reset(token)


def encode(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder.encode(texts)``, taking the rows computed ahead by this embedder."""
    current = _AHEAD.get()
    if current is None or current[0] is not embedder or not texts:
        return embedder.encode(texts)
    known = current[1]
    missing = [t for t in dict.fromkeys(texts) if t not in known]
    extra = dict(zip(missing, embedder.encode(missing), strict=True)) if missing else {}
    return np.stack([known[t] if t in known else extra[t] for t in texts])


@contextmanager
def nearest_ahead(odb: OrchestratorDB, texts: Sequence[str], k: int) -> Iterator[None]:
    """For the block, ``odb``'s vector index holds the ``k`` nearest memories of each of
    ``texts`` computed ahead (by :func:`ahead`), ranked in one product
    (:meth:`~orchmem.models.storage.search.vectors.VectorIndex.rank_ahead`): a task's
    reconciliation then only scores the memories added since. Nothing when no text was
    computed ahead."""
    current = _AHEAD.get()
    rows = [] if current is None else \
        [current[1][t] for t in dict.fromkeys(texts) if t in current[1]]
    if current is None or not rows:
        yield
        return
    index = index_for(odb, current[0].version, int(rows[0].shape[0]))
    with index.lock:
        index.rank_ahead(np.stack(rows), k)
    try:
        yield
    finally:
        index.forget_ahead()
