"""The reranker plug-in (docs/concepts/recall.md#the-reranker).

``memory.retrieval.reranker = "package.module:function"`` names a callable, resolved
as the extractor is (models/core/registry.py). Recall calls it once, after fusion and
the plan's steps, as ``function(query, candidates)``: ``candidates`` are the best
``rerank_top_k`` memories, best first, each ``{"memoryId", "type", "content",
"score"}``. It returns memoryIds, best first: those it names come first in its order,
the candidates it leaves out follow in the fused order, and the answer keeps the first
``top_n``. Each memory keeps its fused scores (the bundle's rank is its new place).

A reranker that cannot be imported, raises, or returns anything but a list of the
candidates' own ids (an unknown id, a repeat, a non-string) changes nothing: the fused
order stands, and the bundle says why in ``warnings``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchmem.config import MemoryValidationError
from orchmem.models.core.registry import resolve
from orchmem.models.recall.ranking import Ranked

Reranker = Callable[[str, list[dict[str, Any]]], Sequence[str]]
SETTING = "memory.retrieval.reranker"
#: Characters of a candidate's content the reranker is given.
MAX_CONTENT_CHARS = 2000


def rerank(spec: str, query: str, ranked: list[Ranked], rows: Mapping[str, tuple[Any, ...]],
           warnings: list[str]) -> list[Ranked]:
    """``ranked`` in the order the reranker ``spec`` gives (see the module); on any
    failure ``ranked`` unchanged and a warning naming the setting."""
    built_in: dict[str, Reranker] = {}  # plug-ins only: no reranker is built in
    try:
        function = resolve(spec, built_in, setting=SETTING, error=MemoryValidationError)
    except MemoryValidationError as exc:
        warnings.append(f"{exc.message}; kept the fused order")
        return ranked
    candidates = [_candidate(r, rows.get(r.memory_id)) for r in ranked]
    try:
        answer = function(query, candidates)
    except Exception as exc:  # a plug-in's failure: whatever it raised, recall answers
        warnings.append(f"{SETTING} {spec!r} failed ({type(exc).__name__}: "
                        f"{str(exc)[:200]}); kept the fused order")
        return ranked
    problem = _problem(answer, {r.memory_id for r in ranked})
    if problem is not None:
        warnings.append(f"{SETTING} {spec!r} returned {problem}; kept the fused order")
        return ranked
    by_id = {r.memory_id: r for r in ranked}
    named = list(answer)
    return [*(by_id[m] for m in named), *(r for r in ranked if r.memory_id not in set(named))]


def _candidate(item: Ranked, row: tuple[Any, ...] | None) -> dict[str, Any]:
    # a node row (models/storage/search/reads.py): type at 1, content at 3
    return {"memoryId": item.memory_id, "type": row[1] if row else None,
            "content": str(row[3])[:MAX_CONTENT_CHARS] if row else "",
            "score": item.score}


def _problem(answer: object, known: set[str]) -> str | None:
    """Why ``answer`` is not a list of distinct candidate ids (None: it is)."""
    if not isinstance(answer, list | tuple):
        return f"a {type(answer).__name__}, not a list of memoryIds"
    seen: set[str] = set()
    for position, value in enumerate(answer):
        if not isinstance(value, str):
            return f"a {type(value).__name__} at position {position}, not a memoryId"
        if value not in known:
            return f"an id that is not one of its candidates at position {position}"
        if value in seen:
            return f"a repeated memoryId at position {position}"
        seen.add(value)
    return None
