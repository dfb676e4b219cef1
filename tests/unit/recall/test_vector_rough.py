"""The vector index ranks a float16 copy first from ROUGH_FROM vectors on, then scores
exactly the rows that can reach the top: the answer is that of every row scored
exactly, near ties and equal vectors included, and the float32 product's to a
cosine's last bit."""

from __future__ import annotations

import numpy as np
import pytest

from orchmem.models.storage.search import vectors
from orchmem.models.storage.search.vectors import ROUGH_FROM, VectorIndex, dot, exact_scores


def _index(matrix: np.ndarray) -> VectorIndex:
    index = VectorIndex(embedder="toy", dim=matrix.shape[1])
    index._reset()
    # ids that do not sort in load order, so a tie broken on position would show
    index._apply([(f"m-{(i * 7919) % len(matrix):06d}", row.tobytes())
                  for i, row in enumerate(matrix)])
    return index


def _exact(index: VectorIndex, query: np.ndarray, k: int) -> list[vectors.VectorHit]:
    return vectors._top_ids(index, exact_scores(index.matrix[:len(index)], query), k)


def _product(index: VectorIndex, query: np.ndarray, k: int) -> list[vectors.VectorHit]:
    return vectors._top_ids(index, dot(index.matrix[:len(index)], query), k)


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("k", [1, 10, 116])
def test_the_rough_first_search_answers_as_the_exact_product(k: int) -> None:
    rng = np.random.default_rng(5)
    base = _unit(rng.standard_normal((ROUGH_FROM * 2, 64)))
    # near duplicates and exact duplicates: scores closer than float16 can tell apart
    base[100:140] = _unit(base[99] + 1e-4 * rng.standard_normal((40, 64)))
    base[200:210] = base[199]
    index = _index(base)
    assert index.rough.dtype == np.float16 and len(index) >= ROUGH_FROM
    for query in [base[99], base[199], *_unit(rng.standard_normal((20, 64)))]:
        rough, exact = index.top(query, k), _exact(index, query, k)
        assert rough == exact
        product = _product(index, query, k)
        assert np.allclose([h.cosine for h in rough], [h.cosine for h in product],
                           rtol=0, atol=1e-6)


def test_replaced_and_appended_vectors_reach_the_rough_copy() -> None:
    rng = np.random.default_rng(6)
    base = _unit(rng.standard_normal((ROUGH_FROM + 10, 32)))
    index = _index(base)
    target = _unit(rng.standard_normal(32))
    moved = index.ids[3]
    index._apply([(moved, target.tobytes()), ("m-new", (-target).tobytes())])
    assert np.array_equal(index.rough[index.positions[moved]], target.astype(np.float16))
    assert index.top(target, 1)[0].memory_id == moved
    assert index.top(-target, 1)[0].memory_id == "m-new"
