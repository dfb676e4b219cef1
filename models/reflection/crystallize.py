"""Reflection's crystal stage: compile every topic, then write what changed in one
transaction (new crystals, rewrites in place, retractions, PartOf edges, vectors).

A crystal's vector is the normalized mean of its units' vectors (the model embeds its
text only when no unit has a vector; ``orchmem reembed`` with another model embeds it
like any memory).

What a crystal holds is decided by :func:`orchmem.models.reflection.crystals.compile_topic`; this
module only applies it. A crystal's memoryId is derived from its topic, so rebuilding a
topic never makes a second one; a crystal whose topic fell below the threshold is
retracted, and comes back (the same memory, active again) if the topic grows back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from orchmem.models.core.shapes import (
    EdgeInput,
    EdgeType,
    MemoryInput,
    Status,
    content_fingerprint,
    derive_id,
    summarize,
)
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.reflection.crystals import Compiled, Summariser, by_topic, compile_topic
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.memories.edges import insert_edge
from orchmem.models.storage.memories.events import add_event
from orchmem.models.storage.reflection import units as reflection
from orchmem.models.storage.reflection.units import StoredUnit
from orchmem.models.storage.search.vectors import VectorIndex, store_embeddings


def crystallize(odb: OrchestratorDB, units: Sequence[StoredUnit], embedder: Embedder,
                index: VectorIndex, *, key: str, summariser: Summariser) -> dict[str, int]:
    """Compile, rebuild or retract the crystal of every topic; returns the counts."""
    settings = odb.memory
    groups = by_topic(units)
    compiled = {topic: compile_topic(
        topic, members, min_units=settings.reflect.crystal_min_units,
        summary_units=settings.reflect.crystal_summary_units,
        low_confidence=settings.bulletin.low_confidence, summariser=summariser)
        for topic, members in groups.items()}
    with odb.read():
        existing = reflection.crystals()
        active = {m for m, _ in existing.values()
                  if (s := memories.get(m)) is not None and s.status == Status.ACTIVE.value}
    todo = [c for t, c in compiled.items() if c is not None and (
        t not in existing or existing[t][1] != c.digest or existing[t][0] not in active)]
    retire = [t for t, (m, _) in existing.items() if m in active and compiled.get(t) is None]
    vectors = [_centroid(index, c.unit_ids) for c in todo]
    missing = [i for i, v in enumerate(vectors) if v is None]
    if missing:
        for i, vector in zip(missing, embedder.encode([todo[i].content for i in missing]),
                             strict=True):
            vectors[i] = vector
    with odb.write():
        built = [_build(odb, c, existing.get(c.topic, (None, ""))[0], key) for c in todo]
        store_embeddings([(m, v) for m, v in zip(built, vectors, strict=True)
                          if v is not None], embedder.version)
        for topic in retire:
            _retire(existing[topic][0], topic, key)
    return {"crystalsBuilt": len(todo), "crystalsRetracted": len(retire),
            "crystals": sum(1 for c in compiled.values() if c is not None)}


def _centroid(index: VectorIndex, unit_ids: Sequence[str]) -> np.ndarray | None:
    """A crystal's vector: the normalized mean of its units' vectors (what the topic is
    about, all of it, at no model cost), or None when none of them has one."""
    rows = [index.positions[u] for u in unit_ids if u in index.positions]
    if not rows:
        return None
    mean = index.matrix[np.array(rows)].mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm else None


def _build(odb: OrchestratorDB, compiled: Compiled, crystal_id: str | None, key: str) -> str:
    """Insert or rewrite one crystal and its PartOf edges; returns its memoryId."""
    fingerprint = content_fingerprint(compiled.type, compiled.content)
    fields: dict[str, object] = {"type": compiled.type, "content": compiled.content,
              "summary": summarize(compiled.content), "importance": compiled.importance,
              "confidence": compiled.confidence,
              "fingerprint": fingerprint}
    if crystal_id is None:
        crystal_id = _new_id(odb, compiled.topic)
        memory = MemoryInput.model_validate({
            "type": compiled.type, "content": compiled.content,
            "importance": compiled.importance, "confidence": compiled.confidence,
            "source": {"sourceType": "manual", "capturedBy": "system"}})
        memories.insert_memory(crystal_id, memory, key=key, fingerprint=fingerprint)
    reflection.rewrite_crystal(crystal_id, fields)
    reflection.set_topics({crystal_id: compiled.topic})
    reflection.drop_part_of(crystal_id, compiled.unit_ids)
    for unit in compiled.unit_ids:
        insert_edge(odb, EdgeInput(from_memory_id=unit, to_memory_id=crystal_id,
                                   edge_type=EdgeType.PART_OF, reason="crystal"),
                    from_id=unit, to_id=crystal_id, key=key, actor="system")
    reflection.save_crystal(compiled.topic, crystal_id, compiled.digest,
                            len(compiled.unit_ids))
    add_event("crystallize", [crystal_id], after={"units": len(compiled.unit_ids),
                                                  "topic": compiled.topic},
              actor="system", key=key)
    return crystal_id


def _new_id(odb: OrchestratorDB, topic: str) -> str:
    """The first free id of ``topic``'s crystal (a hard-forgotten one keeps its row)."""
    generation = 0
    while memories.exists(candidate := derive_id("m", odb.orchestrator_id, "crystal", topic,
                                                 generation)):
        generation += 1
    return candidate


def _retire(crystal_id: str, topic: str, key: str) -> None:
    stored = memories.get(crystal_id)
    if stored is not None and stored.status == Status.ACTIVE.value:
        memories.set_status(stored, Status.RETRACTED, actor="system", key=key,
                            reason="its topic fell below crystal_min_units")
    reflection.save_crystal(topic, crystal_id, "", 0)

