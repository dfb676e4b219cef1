"""Reconciling a candidate with what is already known: reinforce, update, contradict or add.

For each proposed memory, inside the write transaction, in this order:

1. **Duplicate.** A retracted (soft-forgotten), not erased memory of the same type and
   normalized content, when no active one matches, is said again: it becomes active
   (a ``restate`` event). An active memory of the same type with the same normalized content
   (fingerprint), or a near-duplicate, is reinforced (confidence, updatedAt, one more
   source row) instead of copied. Near-duplicate means a vector at cosine >=
   ``dedup_similarity`` *and* the same gist in words: the same numbers and a word
   overlap (Jaccard) of at least 0.6. Embeddings alone would merge "the code is 8082"
   into "the code is 3468"; a merge must never lose a fact.
2. **Same subject, same value.** An active memory of the same type that fills the same
   exclusive slot (``subject``) with the same value, or a preference the candidate only
   restates (models/core/preferences.py), is a restatement: reinforced.
   Either way, a statement this memory already holds (the same words from the same
   conversation, workflow run and step, or file: a transcript sent again under a new
   key) changes nothing: no confidence, no source row, no event.
3. **Same subject, another value.** The candidate is stored, then linked to each such
   older memory (for the broad subjects "prefer", "decision" and "instruction" only
   when their vectors are at cosine >= ``related_similarity``, so "I prefer tea" does
   not touch "I prefer window seats"; two opposite preferences, "I prefer coffee to
   tea" and "Prefers tea", are linked whatever their cosine, and are never merged as
   near-duplicates: models/core/preferences.py). A third person's preference ("The
   customer prefers email") has a subject of its own, ``prefer:customer``. The policy:

   - the candidate was stated by the user (their own words, not hedged, not inferred)
     with confidence >= the older one's: the older memory becomes ``superseded`` and an
     ``Updates`` edge goes new -> old;
   - otherwise both stay ``active`` with a ``Contradicts`` edge new -> old, and recall
     penalizes the older one while the contradiction stands.

Nothing is deleted. Every decision writes an audit event.

The policy (:func:`decide`, :func:`link`, :func:`same_gist`) is pure: it takes the
stored state of the memories a candidate could touch and returns what to do. The
:class:`Reconciler` fetches that state through the storage layer, asks the policy, and
applies its answer with storage writes, all inside the caller's write transaction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from orchmem.config.memory_settings import WritebackSettings
from orchmem.models.core.preferences import opposite, restates
from orchmem.models.core.shapes import (
    CapturedBy,
    EdgeInput,
    EdgeType,
    MemoryInput,
    MemoryType,
    Status,
    content_fingerprint,
    format_ts,
    utc_now,
)
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.memories.edges import insert_edge
from orchmem.models.storage.memories.events import add_event
from orchmem.models.storage.memories.rows import (
    StoredMemory,
    insert_memory,
    reinforce,
    said_before,
    set_status,
)
from orchmem.models.storage.search.vectors import VectorIndex, dot
from orchmem.models.writeback.extraction import Candidate, subject_of

#: Subjects too broad to link on their own: the vectors must agree as well.
BROAD_SUBJECTS = frozenset({"prefer", "decision", "instruction"})
#: Broad too: the preferences of one named person ("prefer:customer").
BROAD_PREFIX = "prefer:"


def broad(subject: str | None) -> bool:
    """True for a subject too broad to link two memories on its own."""
    return subject in BROAD_SUBJECTS or (subject or "").startswith(BROAD_PREFIX)


@dataclass(frozen=True)
class Proposed:
    """A validated memory on its way in, with what reconciliation needs to know."""

    memory: MemoryInput
    vector: np.ndarray | None = None
    subject: str | None = None
    value: str | None = None
    stated: bool = False

    @classmethod
    def explicit(cls, memory: MemoryInput, vector: np.ndarray | None = None) -> Proposed:
        """An explicit memory: stated when the user captured it; subject from its text."""
        subject, value = subject_of(memory.type, memory.content)
        return cls(memory=memory, vector=vector, subject=subject, value=value,
                   stated=memory.source.captured_by == CapturedBy.USER)

    @classmethod
    def extracted(cls, memory: MemoryInput, candidate: Candidate) -> Proposed:
        """An extracted memory: subject, value and stated as the extractor found them."""
        return cls(memory=memory, subject=candidate.subject,
                   value=candidate.value, stated=candidate.stated)


@dataclass
class Outcome:
    """What one proposed memory did to the store."""

    memory_id: str
    action: str  # created | reinforced | restated | unchanged
    #: memoryIds that became superseded (the new one itself, if it was the older claim).
    superseded: list[str] = field(default_factory=list)
    #: (newer, older) pairs now joined by a Contradicts edge.
    contradicted: list[tuple[str, str]] = field(default_factory=list)


_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
#: Word overlap two near-duplicates must share.
MIN_WORD_OVERLAP = 0.6


def same_gist(a: str, b: str) -> bool:
    """True when two texts carry the same numbers and mostly the same words."""
    if set(_NUMBER.findall(a)) != set(_NUMBER.findall(b)):
        return False
    words_a, words_b = set(_WORD.findall(a.casefold())), set(_WORD.findall(b.casefold()))
    if not words_a or not words_b:
        return False
    return len(words_a & words_b) / len(words_a | words_b) >= MIN_WORD_OVERLAP


# -- the policy, over values -------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What to do with one proposed memory.

    ``reinforce`` or ``unchanged`` name the ``existing`` memory that already holds it;
    ``create`` lists the ``related`` older memories on the same subject to :func:`link`.
    """

    action: Literal["create", "reinforce", "unchanged"]
    existing: StoredMemory | None = None
    related: tuple[StoredMemory, ...] = ()


@dataclass(frozen=True)
class Link:
    """How a new memory and a stored one on the same subject are joined."""

    newer_id: str
    older_id: str
    edge_type: EdgeType
    reason: str

    @property
    def supersedes(self) -> bool:
        """True when the older memory becomes ``superseded``."""
        return self.edge_type == EdgeType.UPDATES


def related(proposed: Proposed, same_subject: Sequence[tuple[StoredMemory, float | None]],
            related_similarity: float) -> list[StoredMemory]:
    """The stored memories on ``proposed``'s subject it may update or contradict.

    ``same_subject`` pairs each active memory of the subject with the cosine of its
    vector to ``proposed``'s (None when either has none). A broad subject links only
    memories at cosine >= ``related_similarity``, and opposite preferences.
    """
    if not broad(proposed.subject):
        return [stored for stored, _ in same_subject]
    return [stored for stored, cosine in same_subject
            if (cosine is not None and proposed.vector is not None
                and cosine >= related_similarity) or _opposite_preferences(proposed, stored)]


def decide(proposed: Proposed, *, duplicate: StoredMemory | None,
           similar: Sequence[tuple[StoredMemory, float]],
           same_subject: Sequence[tuple[StoredMemory, float | None]],
           settings: WritebackSettings,
           holds: Callable[[StoredMemory], bool]) -> Decision:
    """Reinforce, leave unchanged, or create ``proposed``.

    ``duplicate`` is the active memory of the same type and fingerprint; ``similar`` the
    active memories of the same type near its vector, with their cosines;
    ``same_subject`` as in :func:`related`. ``holds(m)`` says whether ``m`` already holds
    this statement from the same place (then nothing changes).
    """
    linked = related(proposed, same_subject, settings.related_similarity)
    existing = (duplicate or _near_duplicate(proposed, similar, settings.dedup_similarity)
                or _restatement(proposed, linked))
    if existing is None:
        return Decision("create", related=tuple(linked))
    return Decision("unchanged" if holds(existing) else "reinforce", existing)


def _near_duplicate(proposed: Proposed, similar: Sequence[tuple[StoredMemory, float]],
                    dedup_similarity: float) -> StoredMemory | None:
    if proposed.vector is None:
        return None
    close = sorted(((cosine, stored.memory_id, stored) for stored, cosine in similar
                    if cosine >= dedup_similarity), key=lambda c: (c[0], c[1]), reverse=True)
    content = proposed.memory.content
    return next((stored for _, _, stored in close if same_gist(stored.content, content)
                 and not _opposite_preferences(proposed, stored)), None)


def _both_preferences(proposed: Proposed, stored: StoredMemory) -> bool:
    """True when the candidate and the stored memory are both Preferences."""
    return (proposed.memory.type == MemoryType.PREFERENCE
            and stored.type == MemoryType.PREFERENCE.value)


def _opposite_preferences(proposed: Proposed, stored: StoredMemory) -> bool:
    """True when both are preferences and one prefers what the other puts below."""
    return _both_preferences(proposed, stored) and opposite(proposed.memory.content,
                                                            stored.content)


def _restatement(proposed: Proposed, linked: Sequence[StoredMemory]) -> StoredMemory | None:
    if not proposed.subject or proposed.value is None:
        return None
    return next((s for s in linked if (s.value or "") == proposed.value
                 or (_both_preferences(proposed, s) and restates(proposed.memory.content,
                                                                 s.content))), None)


def link(proposed: Proposed, new_id: str, stored: StoredMemory) -> Link:
    """The edge between the new memory ``new_id`` and ``stored``, on the same subject.

    "Newer" is decided by when each was said (``createdAt``), not by arrival order: a
    write-back redelivered late must not let an old statement win. The newer one
    supersedes the older (``Updates``) when the user stated it with at least the older
    one's confidence; otherwise they contradict each other.
    """
    said_at = format_ts(proposed.memory.created_at or utc_now())
    if said_at >= stored.created_at:
        newer_id, older_id = new_id, stored.memory_id
        stated, confidence = proposed.stated, proposed.memory.confidence
        older_confidence = stored.confidence
    else:
        newer_id, older_id = stored.memory_id, new_id
        stated, confidence = stored.stated, stored.confidence
        older_confidence = proposed.memory.confidence
    if stated and confidence >= older_confidence:
        return Link(newer_id, older_id, EdgeType.UPDATES, f"restates {proposed.subject}")
    return Link(newer_id, older_id, EdgeType.CONTRADICTS, f"conflicts on {proposed.subject}")


# -- applying it, inside one write transaction ---------------------------------------

#: Nearest stored neighbours looked at per candidate.
NEIGHBOURS = 8


@dataclass
class Reconciler:
    """Applies the policy to each proposed memory of one write transaction.

    ``prepare`` finds every candidate's nearest stored neighbours in one matrix product
    before the loop (a bulk write of n memories costs one n x N product, not n).
    """

    key: str
    settings: WritebackSettings
    index: VectorIndex | None = None
    #: memoryIds and vectors (rows of ``fresh_matrix``) of memories created earlier in
    #: this same transaction.
    fresh_ids: list[str] = field(default_factory=list)
    fresh_rows: dict[str, int] = field(default_factory=dict)
    fresh_matrix: np.ndarray | None = None
    neighbours: dict[int, list[tuple[str, float]]] = field(default_factory=dict)

    def prepare(self, proposals: list[Proposed]) -> None:
        """Find the stored neighbours of every proposal with a vector, in one product."""
        with_vectors = [(i, p.vector) for i, p in enumerate(proposals) if p.vector is not None]
        if with_vectors:
            self.fresh_matrix = np.zeros((len(with_vectors), with_vectors[0][1].shape[0]),
                                         dtype=np.float32)
        if self.index is None or not len(self.index) or not with_vectors:
            return
        queries = np.vstack([v for _, v in with_vectors])
        for (position, _), hits in zip(with_vectors, self.index.top_many(queries, NEIGHBOURS),
                                       strict=True):
            self.neighbours[position] = [(h.memory_id, h.cosine) for h in hits]

    def apply(self, odb: OrchestratorDB, memory_id: str, proposed: Proposed,
              position: int = -1) -> Outcome:
        """Reinforce, keep or create ``proposed`` (as ``memory_id``) and link it; returns
        what it did. Call inside ``odb.write()``."""
        memory = proposed.memory
        memory_type = memory.type.value
        fingerprint = content_fingerprint(memory_type, memory.content)
        duplicate = memories.find_duplicate(memory_type, fingerprint, within=memory)
        similar = self._similar(proposed, position) if duplicate is None else []
        same_subject = self._same_subject(proposed) if duplicate is None else []
        decision = decide(proposed, duplicate=duplicate, similar=similar,
                          same_subject=same_subject, settings=self.settings,
                          holds=lambda stored: said_before(stored, memory))
        if duplicate is None and decision.existing is None:
            retracted = memories.find_retracted(memory_type, fingerprint, within=memory)
            if retracted is not None:
                # said again after a soft forget or retract: new evidence, active again
                memories.restate(retracted, actor=memory.source.captured_by.value,
                                 key=self.key)
                return Outcome(retracted.memory_id, "restated")
        if decision.existing is not None:
            if decision.action == "unchanged":
                return Outcome(decision.existing.memory_id, "unchanged")
            reinforce(decision.existing, memory, key=self.key)
            return Outcome(decision.existing.memory_id, "reinforced")
        self._create(memory_id, proposed, fingerprint)
        outcome = Outcome(memory_id, "created")
        for stored in decision.related:
            self._link(odb, outcome, proposed, stored)
        return outcome

    def _create(self, memory_id: str, proposed: Proposed, fingerprint: str) -> None:
        memory = proposed.memory
        insert_memory(memory_id, memory, key=self.key, fingerprint=fingerprint,
                      subject=proposed.subject, value=proposed.value, stated=proposed.stated)
        add_event("create", [memory_id],
                  after={"type": memory.type.value, "importance": memory.importance,
                         "confidence": memory.confidence, "subject": proposed.subject},
                  actor=memory.source.captured_by.value, key=self.key)
        if proposed.vector is not None and self.fresh_matrix is not None:
            self.fresh_rows[memory_id] = len(self.fresh_ids)
            self.fresh_matrix[len(self.fresh_ids)] = proposed.vector
            self.fresh_ids.append(memory_id)

    def _link(self, odb: OrchestratorDB, outcome: Outcome, proposed: Proposed,
              stored: StoredMemory) -> None:
        edge = link(proposed, outcome.memory_id, stored)
        if edge.supersedes:
            older = stored if edge.older_id == stored.memory_id else \
                memories.get(outcome.memory_id)
            assert older is not None  # the new memory was inserted in this transaction
            set_status(older, Status.SUPERSEDED, reason="restated by the user",
                       actor="extractor", key=self.key, by=edge.newer_id)
            outcome.superseded.append(edge.older_id)
        else:
            outcome.contradicted.append((edge.newer_id, edge.older_id))
            add_event("contradict", [edge.newer_id, edge.older_id],
                      after={"subject": proposed.subject}, reason=edge.reason,
                      actor="extractor", key=self.key)
        insert_edge(odb, EdgeInput(from_memory_id=edge.newer_id, to_memory_id=edge.older_id,
                                   edge_type=edge.edge_type, weight=1.0, reason=edge.reason),
                    from_id=edge.newer_id, to_id=edge.older_id, key=self.key,
                    actor="extractor")

    # -- what the policy looks at ------------------------------------------------------

    def _same_subject(self, proposed: Proposed) -> list[tuple[StoredMemory, float | None]]:
        if not proposed.subject:
            return []
        stored = memories.same_subject(proposed.memory.type.value, proposed.subject,
                                        within=proposed.memory)
        return [(s, self._cosine(proposed.vector, s.memory_id)) for s in stored]

    def _similar(self, proposed: Proposed,
                 position: int) -> list[tuple[StoredMemory, float]]:
        """Active memories of ``proposed``'s type near its vector, with their cosines."""
        vector = proposed.vector
        if vector is None:
            return []
        pairs: dict[str, float] = {}
        if position in self.neighbours:
            pairs.update(self.neighbours[position])
        elif self.index is not None and len(self.index):
            pairs.update((h.memory_id, h.cosine) for h in self.index.top(vector, NEIGHBOURS))
        if self.fresh_ids and self.fresh_matrix is not None:
            cosines = dot(self.fresh_matrix[: len(self.fresh_ids)], vector)
            for j in np.argpartition(-cosines, min(NEIGHBOURS, len(cosines)) - 1)[:NEIGHBOURS]:
                pairs[self.fresh_ids[j]] = float(cosines[j])
        alive = memories.active_among(proposed.memory.type.value, list(pairs),
                                      within=proposed.memory)
        return [(alive[m], c) for m, c in pairs.items() if m in alive]

    def _cosine(self, vector: np.ndarray | None, memory_id: str) -> float | None:
        if vector is None:
            return None
        if memory_id in self.fresh_rows and self.fresh_matrix is not None:
            return float(np.dot(vector, self.fresh_matrix[self.fresh_rows[memory_id]]))
        if self.index is not None and memory_id in self.index.positions:
            return float(np.dot(vector, self.index.matrix[self.index.positions[memory_id]]))
        return None
