"""Vectors computed ahead for a batch of tasks: one model call for all their texts.

A batch of write-backs (``orchmem.tasks.batch``) embeds every text it can see in its
payloads at once, inside :func:`ahead`; each task then asks :func:`encode` for its own
texts and gets the rows computed ahead, so the model runs once per batch, at its batch
speed, instead of once per task. A text not computed ahead (an extractor's rewording,
say) is embedded then, as without a batch. Outside :func:`ahead`, :func:`encode` is
``embedder.encode``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from orchmem.config import EmbeddingError

from .embedding import Embedder

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
