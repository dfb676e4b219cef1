"""The recall bundle: its wire models, and its parts built from the rows recall read.

A bundle is the answer of :func:`orchmem.models.recall.search.recall`: the nodes best first
with the scores that ranked them, the edges among and next to them, the neighbouring
memories those edges reach, and the sources of each node (at most
:data:`MAX_SOURCES_PER_MEMORY`). Its models are built with :func:`trusted` from values
read back from our own file (models/core/trusted.py).
"""

from __future__ import annotations

from typing import Any

from orchmem.models.core.shapes import (
    Flag,
    MemoryEdge,
    MemoryNode,
    MemoryType,
    Source,
    Status,
    WireModel,
)
from orchmem.models.core.trusted import trusted
from orchmem.models.recall.ranking import Ranked
from orchmem.models.storage.memories.provenance import CapturedSource
from orchmem.models.storage.search import reads as recall_reads
from orchmem.models.storage.search import row_cache

MAX_SOURCES_PER_MEMORY = 5


class Scores(WireModel):
    """Why a memory ranked where it did."""

    score: float
    rrf: float
    vector_rank: int | None = None
    text_rank: int | None = None
    vector_cosine: float | None = None
    text_bm25: float | None = None
    importance: float
    recency: float
    confidence: float
    contradiction: float
    #: The favour of a question that asks for this memory's type (models/language/intent.py).
    intent: float = 1.0


class RecalledMemory(WireModel):
    rank: int
    memory: MemoryNode
    scores: Scores


class Neighbor(WireModel):
    """A memory reached by an edge of a recalled one, shown briefly."""

    memory_id: str
    type: MemoryType
    summary: str
    status: Status


class SourceRecord(Source):
    captured_at: str


class Provenance(WireModel):
    memory_id: str
    sources: list[SourceRecord]


class RecallBundle(WireModel):
    """The answer to a recall: nodes best first, edges, neighbours, provenance, diagnostics."""

    orchestrator_id: str
    query: str
    nodes: list[RecalledMemory]
    edges: list[MemoryEdge]
    neighbors: list[Neighbor]
    provenance: list[Provenance]
    mode: str
    #: False when the vector side could not answer; the nodes then come from full text.
    vector_available: Flag
    candidates: dict[str, int]
    warnings: list[str]
    took_ms: float
    #: With ``episodes=True``: similar past cases (models/execlog/episodes.py), best first.
    episodes: list[dict[str, Any]] = []
    #: The execution log's seq and how far recall's projections lag it (watermark.py).
    watermark: dict[str, Any] = {}
    #: The router's plan and the as-of / latest asked (models/recall/plans.py), or None.
    plan: dict[str, Any] | None = None
    #: A *what happened* recall's execution-log events (models/recall/log_answer.py):
    #: ``runs``, ``events`` (chronological) and ``next`` (the cursor of the next page).
    log: dict[str, Any] | None = None

    @property
    def memory_ids(self) -> list[str]:
        return [n.memory.memory_id for n in self.nodes]


def bundle_parts(found: recall_reads.Assembly, ranked: list[Ranked], cosines: dict[str, float],
                 bm25s: dict[str, float], cache: row_cache.RowCache | None = None
                 ) -> dict[str, Any]:
    """The bundle's nodes, edges, neighbours and provenance; with the snapshot's row
    ``cache``, each memory's source records are made once (each bundle gets its own list)."""
    nodes = []
    for position, item in enumerate(ranked, start=1):
        mods = item.modifiers
        nodes.append(trusted(
            RecalledMemory, rank=position, memory=found.nodes[item.memory_id],
            scores=trusted(
                Scores,
                score=item.score, rrf=item.rrf, vector_rank=item.vector_rank,
                text_rank=item.text_rank, vector_cosine=cosines.get(item.memory_id),
                text_bm25=bm25s.get(item.memory_id), importance=mods.importance,
                recency=mods.recency, confidence=mods.confidence,
                contradiction=mods.contradiction, intent=mods.intent)))
    by_memory = _records(found.sources, [r.memory_id for r in ranked], cache)
    return {
        "nodes": nodes,
        "edges": found.edges,
        "neighbors": [trusted(Neighbor, memory_id=b.memory_id, type=b.type,
                              summary=b.summary, status=b.status)
                      for b in found.neighbors],
        "provenance": [trusted(Provenance, memory_id=r.memory_id,
                               sources=list(by_memory.get(r.memory_id, ())))
                       for r in ranked],
    }


def _records(sources: list[CapturedSource], ids: list[str], cache: row_cache.RowCache | None
             ) -> dict[str, tuple[SourceRecord, ...]]:
    """memoryId -> its first :data:`MAX_SOURCES_PER_MEMORY` sources as records."""
    def made(missing: list[str]) -> dict[str, tuple[SourceRecord, ...]]:
        wanted = set(missing)
        by_memory: dict[str, list[SourceRecord]] = {m: [] for m in missing}
        for captured in sources:
            if captured.memory_id in wanted:
                bucket = by_memory[captured.memory_id]
                if len(bucket) < MAX_SOURCES_PER_MEMORY:
                    bucket.append(trusted(SourceRecord, **captured.source.__dict__,
                                          captured_at=captured.captured_at))
        return {m: tuple(records) for m, records in by_memory.items()}
    return row_cache.made_once(cache, "records", ids, made)
