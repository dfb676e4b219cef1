"""The per-process cache of recent query vectors (a small deterministic fake encoder)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.embedding.query_vectors import QueryVectors, query_vectors


class Counting(Embedder):
    def __init__(self, version: str = "count:2:norm") -> None:
        self.dim, self.version, self.calls = 2, version, 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += len(texts)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_a_repeated_query_is_embedded_once() -> None:
    cache, model = QueryVectors(4), Counting()
    first = cache.vector(model, "what does Alice prefer?")
    again = cache.vector(model, "what does Alice prefer?")
    assert model.calls == 1 and again is first
    assert not first.flags.writeable  # nobody can change what the next caller gets
    with pytest.raises(ValueError):
        first[0] = 0.0


def test_the_cache_keeps_the_most_recent_entries_and_keys_on_the_version() -> None:
    cache, model = QueryVectors(2), Counting()
    cache.vector(model, "a")
    cache.vector(model, "b")
    cache.vector(model, "a")  # now the most recent
    cache.vector(model, "c")  # evicts "b"
    assert len(cache) == 2 and model.calls == 3
    cache.vector(model, "a")
    assert model.calls == 3
    cache.vector(model, "b")
    assert model.calls == 4
    other = Counting("other:2:norm")
    cache.vector(other, "a")
    assert other.calls == 1  # another model's vector is never served


def test_size_zero_turns_the_cache_off() -> None:
    cache, model = QueryVectors(0), Counting()
    cache.vector(model, "a")
    cache.vector(model, "a")
    assert model.calls == 2 and len(cache) == 0
    assert query_vectors(3) is query_vectors(3)
