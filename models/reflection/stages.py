"""Reflection: looking back over an orchestrator's memory, in stages that each commit.

1. **topics** (models/reflection/topics.py): every active unit's topic, written where it changed;
2. **insights**: a conflict insight for every unresolved Contradicts edge, dismissed once
   resolved (models/storage/reflection/insights.py);
3. **proposals** (models/reflection/evolves.py): for the units written since the last reflection
   (``meta.reflect_cursor``), relations to older units of their topic; in ``auto`` mode
   the ones over the threshold are accepted at once by the system (models/reflection/review.py);
4. **crystals** (models/reflection/crystals.py): compiled, rebuilt or retracted per topic;
5. **projection** (models/bulletin/working.py): working.md, when dirty.

Every stage is idempotent and commits by itself, so a run that dies midway is finished
by the next one (the task is redelivered, or beat publishes it again): topics are
recomputed, proposals are keyed by fingerprint, crystals by the digest of their units.
The run ends by recording the audit watermark it reflected (``reflect_watermark``):
beat publishes reflection only where memory changed since (or working.md is due).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from orchmem.config import MemoryValidationError
from orchmem.models.bulletin.working import MAX_AGE, path_of, refresh, written
from orchmem.models.core.shapes import derive_id, format_ts, utc_now
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.reflection.crystallize import crystallize
from orchmem.models.reflection.crystals import Summariser, by_topic, extractive
from orchmem.models.reflection.evolves import Proposal, auto_applies, propose
from orchmem.models.reflection.review import accept_in_transaction
from orchmem.models.reflection.topics import Unit, assign
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.events import set_meta, watermark
from orchmem.models.storage.reflection import insights
from orchmem.models.storage.reflection import units as reflection
from orchmem.models.storage.reflection.insights import StoredProposal
from orchmem.models.storage.reflection.units import StoredUnit
from orchmem.models.storage.search.vectors import VectorIndex, index_for
from orchmem.models.telemetry import meters, names, spans

META_CURSOR = "reflect_cursor"
META_WATERMARK = "reflect_watermark"
META_LAST = "last_reflect_at"


def reflect(odb: OrchestratorDB, embedder: Embedder, *, key: str,
            summariser: Summariser = extractive) -> dict[str, Any]:
    """Run every stage once; returns their counts and the seconds each took. One span
    holds the counts, each stage's seconds and the outcome (``ok``, or the error's
    type), which ``orchmem.reflection.runs`` counts."""
    with spans.span(names.SPAN_REFLECT, {names.ORCHESTRATOR: odb.orchestrator_id,
                                         names.KEY: key}) as span:
        try:
            result = _stages(odb, embedder, key=key, summariser=summariser)
        except Exception as exc:
            span.set(names.OUTCOME, type(exc).__name__)
            meters.reflection_done(type(exc).__name__)
            raise
        if spans.enabled():
            span.update({names.OUTCOME: "ok", **{
                names.REFLECTION + name: value for name, value in result.items()
                if isinstance(value, int | float) and not isinstance(value, bool)}, **{
                names.SECONDS + stage: value for stage, value in result["seconds"].items()}})
        meters.reflection_done("ok")
        return result


def _stages(odb: OrchestratorDB, embedder: Embedder, *, key: str,
            summariser: Summariser) -> dict[str, Any]:
    seconds: dict[str, float] = {}
    counts: dict[str, Any] = {}

    def timed(stage: str, started: float) -> None:
        seconds[stage] = round(time.monotonic() - started, 3)

    started = time.monotonic()
    index = index_for(odb, embedder.version, embedder.dim)
    units = _with_topics(odb, index, counts)
    timed("topics", started)
    started = time.monotonic()
    with odb.write():
        counts["conflictsOpened"], counts["conflictsDismissed"] = insights.sync_conflicts(odb)
    timed("insights", started)
    started = time.monotonic()
    _proposals(odb, units, index, key, counts)
    timed("proposals", started)
    started = time.monotonic()
    counts.update(crystallize(odb, units, embedder, index, key=key, summariser=summariser))
    timed("crystals", started)
    started = time.monotonic()
    counts["working"] = refresh(odb, utc_now())["written"]
    timed("projection", started)
    with odb.write():
        set_meta(META_WATERMARK, str(watermark(odb)))
        set_meta(META_LAST, format_ts(utc_now()))
    return {**counts, "units": len(units), "seconds": seconds}


def reflect_due(odb: OrchestratorDB, now: datetime) -> bool:
    """Whether memory changed since the last reflection, or working.md is missing or a
    day old (cheap: two meta reads and a file header)."""
    seen = written(path_of(odb))
    return odb.meta(META_WATERMARK) != str(watermark(odb)) or seen is None \
        or now - seen[1] >= MAX_AGE


def _with_topics(odb: OrchestratorDB, index: VectorIndex,
                 counts: dict[str, Any]) -> list[StoredUnit]:
    units = reflection.units(odb)
    found = assign([Unit(u.memory_id, u.content, u.subject, u.created_at,
                         _vector(index, u.memory_id)) for u in units],
                   odb.memory.reflect.topic_similarity)
    changes = {u.memory_id: found.get(u.memory_id) for u in units
               if found.get(u.memory_id) != u.topic}
    if changes:
        with odb.write():
            reflection.set_topics(changes)
    counts["topicsChanged"] = len(changes)
    counts["topics"] = len({t for t in found.values() if t})
    return [replace(u, topic=found.get(u.memory_id)) for u in units]


def _vector(index: VectorIndex, memory_id: str) -> np.ndarray | None:
    position = index.positions.get(memory_id)
    return None if position is None else index.matrix[position]


def _proposals(odb: OrchestratorDB, units: list[StoredUnit], index: VectorIndex, key: str,
               counts: dict[str, Any]) -> None:
    cursor = int(odb.meta(META_CURSOR) or 0)

    def cosine(a: str, b: str) -> float | None:
        va, vb = _vector(index, a), _vector(index, b)
        return None if va is None or vb is None else float(np.dot(va, vb))

    evolves = odb.memory.evolves
    made = applied = 0
    with odb.write():
        known = insights.fingerprints()
        for topic, members in by_topic(units).items():
            recent = [u for u in members if u.row_id > cursor]
            if not recent:
                continue
            linked = reflection.linked_pairs([u.memory_id for u in members])
            for proposal in propose(recent, members, cosine, linked, known):
                stored = _stored(odb, proposal, topic)
                if not insights.add_proposal(stored):
                    continue
                made += 1
                if auto_applies(proposal, evolves.mode, evolves.auto_threshold):
                    applied += _auto_accept(odb, stored, key)
        set_meta(META_CURSOR, str(max([cursor, *(u.row_id for u in units)])))
    counts["proposals"], counts["autoApplied"] = made, applied


def _stored(odb: OrchestratorDB, proposal: Proposal, topic: str) -> StoredProposal:
    return StoredProposal(
        proposal_id=derive_id("p", odb.orchestrator_id, proposal.fingerprint),
        relation=proposal.relation, newer_id=proposal.newer_id, older_id=proposal.older_id,
        topic=topic, reason=proposal.reason, confidence=proposal.confidence,
        fingerprint=proposal.fingerprint, status="pending", decided_by=None,
        decided_reason=None, created_at=format_ts(utc_now()), decided_at=None)


def _auto_accept(odb: OrchestratorDB, stored: StoredProposal, key: str) -> int:
    """Accept ``stored`` as the system; 0 (left for review) when an earlier acceptance of
    this run already changed one of its memories (refused before anything is written)."""
    try:
        accept_in_transaction(odb, stored.proposal_id, actor="system", key=key,
                              reason=f"auto: confidence {stored.confidence}")
    except MemoryValidationError:
        return 0
    return 1
