"""Recently asked query vectors, kept per process so that a repeated question skips the model.

An orchestrator often recalls with the same text several times (before each step of
a workflow, for the selector and then the step); the query embedding is most of a
recall's time, so the last ``embedding.query_cache_size`` vectors are kept, keyed by
the embedder's version and the text. A vector is a pure function of those two, so an
entry never goes stale. The cache is bounded (least recently used leaves first) and
its vectors are read-only, so a caller cannot change what the next one gets.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from orchmem.models.embedding.embedders import Embedder


class QueryVectors:
    """An LRU of ``(embedder version, text) -> vector``, safe across threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def vector(self, embedder: Embedder, text: str) -> np.ndarray:
        """``embedder``'s vector for ``text``: from the cache, or computed and kept.
        Raises EmbeddingError as the embedder does."""
        if self.size <= 0:
            return embedder.encode_one(text)
        key = (embedder.version, text)
        with self._lock:
            found = self._vectors.get(key)
            if found is not None:
                self._vectors.move_to_end(key)
                return found
        vector = embedder.encode_one(text)
        vector.flags.writeable = False
        with self._lock:
            self._vectors[key] = vector
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector

    def cached(self, embedder: Embedder, text: str) -> bool:
        """Whether :meth:`vector` would answer ``text`` from the cache (nothing is computed)."""
        with self._lock:
            return self.size > 0 and (embedder.version, text) in self._vectors

    def __len__(self) -> int:
        return len(self._vectors)


_caches: dict[int, QueryVectors] = {}
_caches_lock = threading.Lock()


def query_vectors(size: int) -> QueryVectors:
    """The process's query-vector cache of ``size`` entries (one per size asked for)."""
    cache = _caches.get(size)
    if cache is None:
        with _caches_lock:
            cache = _caches.setdefault(size, QueryVectors(size))
    return cache
