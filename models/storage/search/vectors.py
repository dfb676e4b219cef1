"""Exact cosine search over one orchestrator's embeddings, cached in the reading process.

The cache holds a float32 matrix of the vectors made by the current embedder. Before a
search it asks ``meta`` two cheap questions: has any vector been written since
(``embedding_seq``), has any been deleted (``embedding_deletes``)? New or replaced
vectors are loaded incrementally (``seq > last seen``); only a delete or a change of
embedder reloads the whole matrix. Vectors are unit length, so cosine = dot product.

The matrix grows by doubling its capacity (an append does not copy 100k rows), and
the product runs in torch, on the thread pool the query embedding just used: numpy's
BLAS threads spin-wait after a product and, on a small machine, starve the next
embedding of its cores (measured: 6 ms -> 55 ms per query at 10k memories).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np

from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.embedding.embedders import vector_to_blob
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.db.statements import run, run_many
from orchmem.models.storage.memories.events import bump_meta, set_meta
from orchmem.models.storage.schema.tables import (
    META_EMBEDDING_DELETES,
    META_EMBEDDING_SEQ,
    MemoryEmbeddingRow,
    live,
)
from orchmem.models.storage.search import ann
from orchmem.models.storage.search.hits import VectorHit, exact_scores

_CACHE_KEY = "vector_index"
#: From this many vectors on, :meth:`VectorIndex.top` ranks a float16 copy first.
ROUGH_FROM = 2048
#: A bound on |float16 score - float32 score| per unit of the query's norm, for unit
#: vectors: fp16 rounding of both sides is at most 2 * 2**-11 of sum |q_i v_i| <= 1
#: (torch accumulates in float32); the largest seen on 10k MiniLM vectors was 1.6e-4.
ROUGH_ERROR = 0.01


@dataclass(frozen=True)
class _Ahead:
    """Each query's nearest rows, ranked ahead (:meth:`VectorIndex.rank_ahead`) among the
    first ``rows`` rows of the index at ``version``; keyed by the query's bytes."""

    version: int
    rows: int
    k: int
    hits: dict[bytes, list[VectorHit]]


@dataclass
class VectorIndex:
    """The vectors of one embedder version, for one orchestrator, in this process."""

    embedder: str
    dim: int
    ids: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    #: Rows ``[:len(ids)]`` are in use; the rest is spare capacity.
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    #: ``matrix`` in float16, the same rows: half the bytes for :meth:`top` to read.
    rough: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float16))
    seq: int = -1
    deletes: int = -1
    #: Changes whenever a row already in the index changes (a replaced vector, a reload):
    #: what was ranked ahead is then void. Appended rows leave it.
    version: int = 0
    ahead: _Ahead | None = field(default=None, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def refresh(self, odb: OrchestratorDB) -> None:
        """Bring the cache up to date with the database (cheap when nothing changed)."""
        meta = dict(odb.sql("SELECT key, value FROM meta WHERE key IN (?, ?)",
                            (META_EMBEDDING_SEQ, META_EMBEDDING_DELETES)))
        seq = int(meta.get(META_EMBEDDING_SEQ, 0))
        deletes = int(meta.get(META_EMBEDDING_DELETES, 0))
        if seq == self.seq and deletes == self.deletes:
            return
        if deletes != self.deletes:
            self._reset()
        rows = self._changed_since(odb, self.seq)
        if any(embedder != self.embedder and memory_id in self.positions
               for memory_id, embedder, _dim, _blob in rows):
            # A vector moved to another embedder: it must leave this index.
            self._reset()
            rows = self._changed_since(odb, 0)
        self._apply([(m, blob) for m, embedder, dim, blob in rows
                     if embedder == self.embedder and dim == self.dim])
        self.seq, self.deletes = seq, deletes

    @staticmethod
    def _changed_since(odb: OrchestratorDB, seq: int) -> list[tuple[str, str, int, bytes]]:
        return odb.sql("SELECT memory_id, embedder, dim, vector FROM memory_embeddings "
                       "WHERE seq > ? ORDER BY seq", (seq,))

    def _reset(self) -> None:
        self.version += 1
        self.ids, self.positions = [], {}
        self.matrix = np.zeros((0, self.dim), dtype=np.float32)
        self.rough = np.zeros((0, self.dim), dtype=np.float16)
        self.seq = 0

    def _apply(self, rows: Sequence[tuple[str, bytes]]) -> None:
        if not rows:
            return
        new_ids: list[str] = []
        new_vectors = []
        for memory_id, blob in rows:
            vector = np.frombuffer(blob, dtype=np.float32)
            position = self.positions.get(memory_id)
            if position is not None:
                self.version += 1
                self.matrix[position] = vector
                self.rough[position] = vector
            else:
                self.positions[memory_id] = len(self.ids) + len(new_ids)
                new_ids.append(memory_id)
                new_vectors.append(vector)
        if new_ids:
            used = len(self.ids)
            needed = used + len(new_ids)
            if needed > self.matrix.shape[0] or self.matrix.shape[1] != self.dim:
                grown = np.zeros((max(needed, 2 * self.matrix.shape[0], 1024), self.dim),
                                 dtype=np.float32)
                if used:
                    grown[:used] = self.matrix[:used]
                self.matrix = grown
                rough = np.zeros(grown.shape, dtype=np.float16)
                rough[:used] = self.rough[:used]
                self.rough = rough
            self.matrix[used:needed] = np.vstack(new_vectors)
            self.rough[used:needed] = self.matrix[used:needed]
            self.ids.extend(new_ids)

    def top(self, query: np.ndarray, k: int) -> list[VectorHit]:
        """The ``k`` most similar vectors, ordered by cosine then memoryId.

        From ROUGH_FROM vectors on, the float16 copy is ranked first (half the memory
        to read: the product is bound by it) and only the rows that can reach the top
        ``k`` are scored exactly (:func:`exact_scores`): those within twice the rough
        error of the rough k-th score. The answer is that of scoring every row
        exactly: the float32 product's but for a cosine's last bit (which could only
        reorder rows tied to that bit), and equal vectors always score alike (a
        float32 product rounds a row by its position)."""
        n = len(self.ids)
        if n == 0 or k <= 0:
            return []
        if n < ROUGH_FROM or k * 4 >= n:
            # Ties on score break on memoryId, so the order never depends on load order.
            return _top_ids(self, dot(self.matrix[:n], query), k)
        rough = dot(self.rough[:n], query)
        kth = -np.partition(-rough, k - 1)[k - 1]
        reach = np.flatnonzero(rough >= kth - 2 * ROUGH_ERROR * float(np.linalg.norm(query)))
        if len(reach) * 4 >= n:
            return _top_ids(self, dot(self.matrix[:n], query), k)
        return _top_ids(self, exact_scores(self.matrix[reach], query), k, reach)

    def top_many(self, queries: np.ndarray, k: int) -> list[list[VectorHit]]:
        """``top`` for each row of ``queries``, with one matrix product; a query ranked
        ahead (:meth:`rank_ahead`) is only scored against the rows added since."""
        n = len(self.ids)
        if n == 0 or k <= 0:
            return [[] for _ in range(queries.shape[0])]
        ahead = self.ahead if self.ahead is not None and self.ahead.version == self.version \
            and self.ahead.k >= k else None
        known = [None if ahead is None else ahead.hits.get(q.tobytes()) for q in queries]
        if ahead is None or all(hits is None for hits in known):
            return self._rank(queries, k)
        missing = [j for j, hits in enumerate(known) if hits is None]
        ranked = dict(zip(missing, self._rank(queries[missing], k) if missing else [],
                          strict=True))
        return [ranked[j] if hits is None else
                self._with_rows_since(ahead.rows, queries[j], hits, k)
                for j, hits in enumerate(known)]

    def rank_ahead(self, queries: np.ndarray, k: int) -> None:
        """Rank every row of the index for each of ``queries`` now, in one matrix product
        (a batch's candidates: one product instead of one per task); a later
        :meth:`top_many` of such a query scores only the rows added after this. The top
        ``k`` of all rows are the top ``k`` of the old rows' top ``k`` and the new rows,
        with the same order (cosine, then memoryId). Void once a row changes; until
        :meth:`forget_ahead`."""
        rows = np.ascontiguousarray(queries, dtype=np.float32)
        hits = self._rank(rows, k) if len(self.ids) else [[] for _ in range(rows.shape[0])]
        self.ahead = _Ahead(self.version, len(self.ids), k,
                            {q.tobytes(): h for q, h in zip(rows, hits, strict=True)})

    def forget_ahead(self) -> None:
        self.ahead = None

    def _rank(self, queries: np.ndarray, k: int) -> list[list[VectorHit]]:
        scores = dot(self.matrix[:len(self.ids)], np.ascontiguousarray(queries.T))
        return [_top_ids(self, scores[:, j], k) for j in range(queries.shape[0])]

    def _with_rows_since(self, start: int, query: np.ndarray, hits: list[VectorHit],
                         k: int) -> list[VectorHit]:
        n = len(self.ids)
        if start >= n:
            return hits[:k]
        scores = dot(self.matrix[start:n], query)
        added = [VectorHit(self.ids[start + i], float(s)) for i, s in enumerate(scores)]
        return sorted([*hits, *added], key=lambda h: (-h.cosine, h.memory_id))[:k]


def _top_ids(index: VectorIndex, scores: np.ndarray, k: int,
             rows: np.ndarray | None = None) -> list[VectorHit]:
    """The best ``k`` of ``scores`` (of the index's rows ``rows``, default all); of the
    rows tied with the k-th score, those first by memoryId."""
    n = scores.shape[0]
    k = min(k, n)
    if k < n:
        kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
        part = np.flatnonzero(scores >= kth)
    else:
        part = np.arange(n)
    ids = [index.ids[i] for i in (part if rows is None else rows[part])]
    # (-score, memoryId) pairs sort as Python floats and strings: the scores negated
    # and converted in one call each, not one numpy scalar per comparison key.
    best = sorted(zip((-scores[part]).tolist(), ids, strict=True))[:k]
    return [VectorHit(memory_id, -negated) for negated, memory_id in best]


def dot(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` in torch (zero-copy views), as float32 numpy (see the module
    docstring); a float16 matrix is multiplied by the query in float16."""
    import torch  # loaded with the embedding model anyway; not at import time

    # A copy (a query is small): the caller's vector may be read-only (a cached one).
    q = torch.from_numpy(np.array(query, dtype=matrix.dtype, order="C"))  # vector or matrix
    with torch.inference_mode():
        return (torch.from_numpy(np.ascontiguousarray(matrix)) @ q).float().numpy()


def product_threads(threads: int) -> None:
    """Let torch use ``threads`` for the product (``embedding.torch_threads``; 0 = leave
    torch's default). On 2 busy cores a 2-thread product waits for a descheduled
    thread: 22 ms p50 instead of 2.6 ms with one thread at 10k vectors (measured)."""
    import torch

    if threads and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def index_for(odb: OrchestratorDB, embedder: str, dim: int) -> VectorIndex:
    """The process's up-to-date index of ``odb`` for ``embedder`` (created on first use).

    Products with it run on ``embedding.torch_threads`` threads (:func:`product_threads`):
    a write's reconciliation as well as a recall's search."""
    product_threads(odb.settings.embedding.torch_threads)
    index = odb.cache.get(_CACHE_KEY)
    if not isinstance(index, VectorIndex) or index.embedder != embedder or index.dim != dim:
        index = VectorIndex(embedder=embedder, dim=dim)
        odb.cache[_CACHE_KEY] = index
    with index.lock:
        index.refresh(odb)
    return index


#: What recall searches: the exact index in this process, or the index file (ann.py).
Searchable: TypeAlias = "VectorIndex | ann.AnnIndex"


def searchable(odb: OrchestratorDB, embedder: str, dim: int) -> Searchable:
    """The index recall's vector stage uses in this snapshot: the approximate index file
    when there is a usable one of at least ``retrieval.ann_threshold`` vectors (the
    matrix is then not loaded), else :func:`index_for`."""
    held = ann.reader(odb, embedder, dim)
    return held if held is not None else index_for(odb, embedder, dim)


def approximate(index: Searchable | None) -> bool:
    """Whether ``index`` is the approximate index file (recall's bundle says so)."""
    return isinstance(index, ann.AnnIndex)


def current(odb: OrchestratorDB, index: Searchable | None, embedder: str,
            dim: int) -> Searchable:
    """``index`` when it is the one for ``embedder`` and ``dim`` (refreshed by the caller
    in this snapshot), else :func:`searchable`."""
    if index is not None and index.embedder == embedder and index.dim == dim:
        return index
    return searchable(odb, embedder, dim)


def search(odb: OrchestratorDB, query: np.ndarray, *, embedder: str, limit: int,
           keep: Callable[[list[str]], set[str]] | None = None,
           within: Sequence[str] | None = None,
           index: Searchable | None = None) -> tuple[list[VectorHit], int]:
    """The top ``limit`` hits, ordered by cosine then memoryId, and the vectors searched.

    ``keep`` filters candidate ids (status, type: one SQL query per window); the window
    over-fetches and widens until ``limit`` hits pass or every vector was looked at.
    ``within`` restricts the search to those memoryIds. Inside the caller's ``odb.read()``
    the refresh and every ``keep`` query see that one snapshot. ``index``: the one
    :func:`index_for` gave in this snapshot (no second refresh), if the caller has it.
    """
    index = current(odb, index, embedder, int(query.shape[0]))
    if isinstance(index, ann.AnnIndex):
        if within is not None:
            found = _stored_scores(odb, index, query, within)
            ranked = sorted(found.items(), key=lambda h: (-h[1], h[0]))
            passing = keep([m for m, _ in ranked]) if keep else None
            return [VectorHit(m, c) for m, c in ranked
                    if passing is None or m in passing][:limit], len(index)
        return ann.search(odb, index, query, limit, keep, _kept), len(index)
    with index.lock:
        total = len(index)
        if within is not None:
            subset = sorted({m for m in within if m in index.positions})
            if not subset:
                return [], total
            rows = np.array([index.positions[m] for m in subset])
            scores = dot(index.matrix[rows], query)
            hits = sorted((VectorHit(m, float(s)) for m, s in zip(subset, scores, strict=True)),
                          key=lambda h: (-h.cosine, h.memory_id))
            passing = keep([h.memory_id for h in hits]) if keep else None
            return [h for h in hits if passing is None or h.memory_id in passing][:limit], total
        window = limit * 2 + 16
        while True:
            hits = index.top(query, window)
            if keep is None:
                return hits[:limit], total
            kept = _kept(hits, keep, limit)
            if len(kept) >= limit or window >= total:
                return kept, total
            window *= 4


#: ``keep`` is first asked about the hits that could fill the answer and this many more.
KEEP_SLACK = 16


def _kept(hits: list[VectorHit], keep: Callable[[list[str]], set[str]],
          limit: int) -> list[VectorHit]:
    """The first ``limit`` of ``hits`` that ``keep`` passes. It is asked in turns, each
    about as many hits as are still missing and :data:`KEEP_SLACK` more: when most
    pass (the usual case) one question about ``limit + KEEP_SLACK`` ids instead of the
    whole over-fetched window (its cost is per id: 0.3-0.4 ms for 116 ids)."""
    kept: list[VectorHit] = []
    checked = 0
    while checked < len(hits) and len(kept) < limit:
        turn = hits[checked:checked + limit - len(kept) + KEEP_SLACK]
        passing = keep([h.memory_id for h in turn])
        kept += [h for h in turn if h.memory_id in passing]
        checked += len(turn)
    return kept[:limit]


def similarities(odb: OrchestratorDB, query: np.ndarray, *, embedder: str,
                 ids: Sequence[str], index: Searchable | None = None) -> dict[str, float]:
    """The cosine of ``query`` with each of ``ids`` that has a vector of ``embedder``
    (``index`` as :func:`search` takes it)."""
    if not ids:
        return {}
    index = current(odb, index, embedder, int(query.shape[0]))
    if isinstance(index, ann.AnnIndex):
        return _stored_scores(odb, index, query, ids)
    with index.lock:
        present = sorted({m for m in ids if m in index.positions})
        if not present:
            return {}
        scores = dot(index.matrix[np.array([index.positions[m] for m in present])], query)
    return {m: float(c) for m, c in zip(present, scores, strict=True)}


def _stored_scores(odb: OrchestratorDB, held: ann.AnnIndex, query: np.ndarray,
                   ids: Sequence[str]) -> dict[str, float]:
    """The cosine of ``query`` with the stored vector of each of ``ids`` that has one of
    the index's embedder (read from memory_embeddings: the matrix is not in memory)."""
    present: list[str] = []
    blobs: list[bytes] = []
    unique = sorted(set(ids))
    for start in range(0, len(unique), 900):
        chunk = unique[start:start + 900]
        for memory_id, blob in odb.sql(
                "SELECT memory_id, vector FROM memory_embeddings WHERE memory_id IN "
                f"({', '.join('?' * len(chunk))}) AND embedder = ? AND dim = ? "
                "ORDER BY memory_id", (*chunk, held.embedder, held.dim)):
            present.append(memory_id)
            blobs.append(blob)
    if not present:
        return {}
    # A copy: torch refuses a read-only buffer.
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(present),
                                                                    held.dim).copy()
    return {m: float(c) for m, c in zip(present, dot(matrix, query), strict=True)}


def store_embeddings(ids_and_vectors: Iterable[tuple[str, np.ndarray]], embedder: str) -> int:
    """Upsert vectors (inside a write transaction); each gets a new change seq."""
    now = format_ts(utc_now())
    rows = list(ids_and_vectors)
    if not rows:
        return 0
    row = run("SELECT value FROM meta WHERE key = ?", (META_EMBEDDING_SEQ,)).fetchone()
    first = (int(row[0]) if row else 0) + 1
    run_many("INSERT OR REPLACE INTO memory_embeddings (memory_id, embedder, dim, vector, "
             "seq, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
             [(memory_id, embedder, int(vector.shape[0]), vector_to_blob(vector), first + i, now)
              for i, (memory_id, vector) in enumerate(rows)])
    set_meta(META_EMBEDDING_SEQ, str(first + len(rows) - 1))
    return len(rows)


def delete_embedding(memory_id: str) -> None:
    if MemoryEmbeddingRow.delete().where(MemoryEmbeddingRow.memory == memory_id).execute():
        bump_meta(META_EMBEDDING_DELETES)


def _stale_from() -> str:
    return f"""
        FROM memories m LEFT JOIN memory_embeddings e ON e.memory_id = m.memory_id
        WHERE {live("m")} AND (e.memory_id IS NULL OR e.embedder != ?)
    """


def count_stale(odb: OrchestratorDB, embedder: str) -> int:
    """How many live memories have no vector, or one made by another embedder than ``embedder``."""
    return int(odb.sql(f"SELECT count(*) {_stale_from()}", (embedder,))[0][0])


def stale(odb: OrchestratorDB, embedder: str, limit: int) -> list[tuple[str, str]]:
    """(memoryId, content) of up to ``limit`` memories :func:`count_stale` counts, oldest first."""
    return [(m, c) for m, c in odb.sql(
        f"SELECT m.memory_id, m.content {_stale_from()} ORDER BY m.id LIMIT ?",
        (embedder, limit))]
