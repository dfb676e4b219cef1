"""A batch's candidates are ranked against the vector index in one product ahead
(``rank_ahead``); each task's ``top_many`` then scores only the rows added since, and
answers as a ranking of every row would, ties on memoryId included."""

from __future__ import annotations

import numpy as np

from orchmem.models.storage.search.vectors import VectorIndex


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def _add(index: VectorIndex, rows: np.ndarray, first: int) -> None:
    # ids that do not sort in load order, so a tie broken on position would show
    index._apply([(f"m-{(i * 7919) % 10007:06d}", row.tobytes())
                  for i, row in enumerate(rows, start=first)])


def _ids_and_scores(hits: list) -> list[tuple[str, float]]:
    return [(h.memory_id, round(h.cosine, 5)) for h in hits]


def test_ranked_ahead_then_rows_added_answers_as_ranking_every_row() -> None:
    rng = np.random.default_rng(11)
    stored = _unit(rng.standard_normal((300, 32)))
    queries = _unit(rng.standard_normal((6, 32)))
    # rows added during the batch: near and equal copies of the queries (ties)
    added = np.vstack([queries[:3], _unit(queries[3:] + 0.01), stored[:2]])
    ahead, plain = VectorIndex(embedder="toy", dim=32), VectorIndex(embedder="toy", dim=32)
    for index in (ahead, plain):
        index._reset()
        _add(index, stored, 0)
    ahead.rank_ahead(queries, 8)
    for step, row in enumerate(added):
        for index in (ahead, plain):
            _add(index, row[None, :], len(stored) + step)
        for j in range(len(queries)):
            assert _ids_and_scores(ahead.top_many(queries[j:j + 1], 8)[0]) == \
                _ids_and_scores(plain.top_many(queries[j:j + 1], 8)[0])
    assert [h.memory_id for h in ahead.top_many(queries[:1], 8)[0]][:1] == \
        [f"m-{(len(stored) * 7919) % 10007:06d}"]


def test_a_query_not_ranked_ahead_or_a_changed_row_ranks_every_row() -> None:
    rng = np.random.default_rng(12)
    stored = _unit(rng.standard_normal((50, 16)))
    queries = _unit(rng.standard_normal((2, 16)))
    index = VectorIndex(embedder="toy", dim=16)
    index._reset()
    _add(index, stored, 0)
    index.rank_ahead(queries[:1], 4)
    other = index.top_many(queries[1:], 4)[0]
    assert [h.memory_id for h in other] == [h.memory_id for h in index._rank(queries[1:], 4)[0]]
    # the best row for the first query is replaced by its opposite: ranked ahead is void
    best = index.top_many(queries[:1], 4)[0][0].memory_id
    index._apply([(best, (-queries[0]).tobytes())])
    assert best not in [h.memory_id for h in index.top_many(queries[:1], 4)[0]]
    index.forget_ahead()
    assert index.ahead is None
