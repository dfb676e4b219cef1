"""Reranker plug-ins for the tests (``memory.retrieval.reranker = "rerankers:<name>"``):
each records what it was given, so a test sees the query and the candidates."""

from __future__ import annotations

from typing import Any

#: (query, candidate ids) of every call, in order.
CALLS: list[tuple[str, list[str]]] = []


def by_length(query: str, candidates: list[dict[str, Any]]) -> list[str]:
    """Shortest content first: an order fusion never gives by itself."""
    CALLS.append((query, [c["memoryId"] for c in candidates]))
    return [c["memoryId"] for c in sorted(candidates, key=lambda c: (len(c["content"]),
                                                                     c["memoryId"]))]


def raising(query: str, candidates: list[dict[str, Any]]) -> list[str]:
    CALLS.append((query, [c["memoryId"] for c in candidates]))
    raise RuntimeError("the reranking service is down")


def unknown(query: str, candidates: list[dict[str, Any]]) -> list[str]:
    CALLS.append((query, [c["memoryId"] for c in candidates]))
    return ["m-00000000-0000000000000000", *(c["memoryId"] for c in candidates)]


NOT_CALLABLE = "a reranker setting naming this is refused when recall resolves it"
