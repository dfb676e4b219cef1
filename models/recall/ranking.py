r"""Ranking: Reciprocal Rank Fusion of the vector and full-text lists, then modifiers.

Pure functions over values; no database, no clock (``now`` is passed in).

**RRF** (Cormack, Clarke & Büttcher, SIGIR 2009). For a memory ``d`` and the ranked
lists ``L`` it appears in (ranks start at 1)::

    rrf(d) = Σ_{l ∈ L} 1 / (rrf_k + rank_l(d))

A memory found by only one list still scores; one found by both adds the two terms.
``rrf_k`` flattens the difference between neighbouring ranks. The paper's 60 was
chosen for fusing many deep (1,000-item) runs; over two 50-item lists it compresses
ranks 1..50 into a 1.8x band, so agreement between the lists outweighs either list's
best hit. The default is therefore 10 (chosen on one half of the LoCoMo conversations
and checked on the other: docs/concepts/recall.md#why-rrf_k-is-10).

**Modifiers** multiply the fused score; each is 1 when its weight is 0, so any of them
can be switched off in settings (``memory.retrieval.*_weight``)::

    importance    f_imp  = 1 + w_imp · (importance - 50) / 50          ∈ [1 - w, 1 + w]
    recency       f_rec  = (1 - w_rec) + w_rec · 0.5 ^ (age_days / half_life_days)
    confidence    f_conf = (1 - w_conf) + w_conf · confidence
    contradiction f_con  = 1 - p   if an active newer memory Contradicts it, else 1
    intent        f_int  = 1 + w_int  if the question asks for d's type (models/language/intent.py)

    score(d) = rrf(d) · f_imp · f_rec · f_conf · f_con · f_int

``age_days`` is measured from the memory's ``createdAt`` to ``now`` (never negative).
The contradiction penalty falls on the contradicted (older) end of an unresolved
``Contradicts`` edge: both memories stay, the newer claim ranks first.

**Determinism.** Equal scores break on memoryId, so the same inputs always give the
same order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from orchmem.config.memory_settings import RetrievalSettings


@dataclass(frozen=True)
class Features:
    """What the modifiers need to know about one memory."""

    memory_id: str
    importance: int
    confidence: float
    created_at: datetime
    contradicted: bool = False
    memory_type: str = ""


# Modifiers and Ranked are made for every candidate of every recall: slotted and not
# frozen, they are built in half the time (a frozen dataclass sets each field through
# object.__setattr__). Nothing changes them; steps make new ones (dataclasses.replace).
@dataclass(slots=True)
class Modifiers:
    importance: float
    recency: float
    confidence: float
    contradiction: float
    intent: float = 1.0

    @property
    def product(self) -> float:
        return (self.importance * self.recency * self.confidence * self.contradiction
                * self.intent)


@dataclass(slots=True)
class Ranked:
    memory_id: str
    score: float
    rrf: float
    vector_rank: int | None
    text_rank: int | None
    modifiers: Modifiers


def ranks(ids: Iterable[str]) -> dict[str, int]:
    """1-based rank of each id in an ordered list (first occurrence wins)."""
    out: dict[str, int] = {}
    for memory_id in ids:
        out.setdefault(memory_id, len(out) + 1)
    return out


def rrf(lists: Sequence[dict[str, int]], k: int) -> dict[str, float]:
    """Reciprocal Rank Fusion of rank maps: ``Σ 1 / (k + rank)`` per id."""
    if k < 1:
        raise ValueError("rrf k must be at least 1")
    fused: dict[str, float] = {}
    for ranking in lists:
        for memory_id, rank in ranking.items():
            fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (k + rank)
    return fused


def importance_factor(importance: int, weight: float) -> float:
    return 1.0 + weight * (importance - 50) / 50.0


def recency_factor(age_days: float, weight: float, half_life_days: float) -> float:
    return (1.0 - weight) + weight * 0.5 ** (max(0.0, age_days) / half_life_days)


def confidence_factor(confidence: float, weight: float) -> float:
    return (1.0 - weight) + weight * confidence


def contradiction_factor(contradicted: bool, penalty: float) -> float:
    return 1.0 - penalty if contradicted else 1.0


def modifiers(features: Features, params: RetrievalSettings, now: datetime,
              favoured: frozenset[str] = frozenset()) -> Modifiers:
    age_days = (now - features.created_at).total_seconds() / 86_400.0
    return Modifiers(
        importance=importance_factor(features.importance, params.importance_weight),
        recency=recency_factor(age_days, params.recency_weight, params.recency_half_life_days),
        confidence=confidence_factor(features.confidence, params.confidence_weight),
        contradiction=contradiction_factor(features.contradicted, params.contradiction_penalty),
        intent=1.0 + params.intent_weight if features.memory_type in favoured else 1.0,
    )


def fuse(vector_ids: Sequence[str], text_ids: Sequence[str], features: dict[str, Features],
         params: RetrievalSettings, now: datetime, top_n: int,
         favoured: frozenset[str] = frozenset(),
         keep: Callable[[str], bool] | None = None,
         dated_ids: Sequence[str] = ()) -> list[Ranked]:
    """Fuse two ranked id lists and apply the modifiers; the best ``top_n``, best first.

    Every id of any list must have an entry in ``features``; ``favoured`` are the
    memory types the question asks about. ``keep`` (the relevance floor) drops ids
    after fusion, so the ranks of the others are those of the full lists.
    ``dated_ids`` is a third list, fused like the others: the memories of the
    question's time window by their cosine (models/recall/plans.py).
    """
    vector_ranks, text_ranks = ranks(vector_ids), ranks(text_ids)
    fused = rrf([vector_ranks, text_ranks, ranks(dated_ids)], params.rrf_k)
    ranked = []
    for memory_id, base in fused.items():
        mods = modifiers(features[memory_id], params, now, favoured)
        ranked.append(Ranked(memory_id=memory_id, score=base * mods.product, rrf=base,
                             vector_rank=vector_ranks.get(memory_id),
                             text_rank=text_ranks.get(memory_id), modifiers=mods))
    ranked.sort(key=lambda r: (-r.score, r.memory_id))
    if keep is None:
        return ranked[:top_n]
    kept: list[Ranked] = []
    for item in ranked:  # best first: the floor is asked only until top_n passed
        if len(kept) >= top_n:
            break
        if keep(item.memory_id):
            kept.append(item)
    return kept
