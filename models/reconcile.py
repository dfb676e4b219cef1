"""Reconciling a candidate with what is already known: reinforce, update, contradict or add.

For each proposed memory, inside the write transaction, in this order:

1. **Duplicate.** An active memory of the same type with the same normalized content
   (fingerprint), or a near-duplicate, is reinforced (confidence, updatedAt, one more
   source row) instead of copied. Near-duplicate means a vector at cosine >=
   ``dedup_similarity`` *and* the same gist in words: the same numbers and a word
   overlap (Jaccard) of at least 0.6. Embeddings alone would merge "the code is 8082"
   into "the code is 3468"; a merge must never lose a fact.
2. **Same subject, same value.** An active memory of the same type that fills the same
   exclusive slot (``subject``) with the same value is a restatement: reinforced.
   Either way, a statement this memory already holds (the same words from the same
   conversation, workflow run and step, or file: a transcript sent again under a new
   key) changes nothing: no confidence, no source row, no event.
3. **Same subject, another value.** The candidate is stored, then linked to each such
   older memory (for the broad subjects "prefer", "decision" and "instruction" only
   when their vectors are at cosine >= ``related_similarity``, so "I prefer tea" does
   not touch "I prefer window seats"). The policy:

   - the candidate was stated by the user (their own words, not hedged, not inferred)
     with confidence >= the older one's: the older memory becomes ``superseded`` and an
     ``Updates`` edge goes new -> old;
   - otherwise both stay ``active`` with a ``Contradicts`` edge new -> old, and recall
     penalizes the older one while the contradiction stands.

Nothing is deleted. Every decision writes an audit event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from orchmem.config.settings import WritebackSettings

from .extraction import Candidate, subject_of
from .schema import (
    CapturedBy,
    EdgeInput,
    EdgeType,
    MemoryInput,
    Status,
    content_fingerprint,
    format_ts,
    utc_now,
)
from .storage.database import OrchestratorDB
from .storage.edges import insert_edge
from .storage.events import add_event
from .storage.memories import insert_memory, reinforce, said_before, set_status
from .storage.tables import MemoryRow
from .storage.vectors import VectorIndex, dot

#: Subjects too broad to link on their own: the vectors must agree as well.
BROAD_SUBJECTS = frozenset({"prefer", "decision", "instruction"})


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
    def extracted(cls, memory: MemoryInput, candidate: Candidate,
                  vector: np.ndarray | None = None) -> Proposed:
        return cls(memory=memory, vector=vector, subject=candidate.subject,
                   value=candidate.value, stated=candidate.stated)


@dataclass
class Outcome:
    memory_id: str
    action: str  # created | reinforced | unchanged
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


#: Nearest stored neighbours looked at per candidate.
NEIGHBOURS = 8


@dataclass
class Reconciler:
    """Decides, for one write transaction, what each proposed memory does.

    ``prepare`` finds every candidate's nearest stored neighbours in one matrix product
    before the loop (a bulk write of n memories costs one n x N product, not n).
    """

    odb: OrchestratorDB
    key: str
    settings: WritebackSettings
    index: VectorIndex | None = None
    #: memoryIds and vectors (rows of ``fresh_matrix``) of memories created earlier in
    #: this same transaction.
    fresh_ids: list[str] = field(default_factory=list)
    fresh_rows: dict[str, int] = field(default_factory=dict)
    fresh_matrix: np.ndarray | None = None
    neighbours: dict[int, list[tuple[str, float]]] = field(default_factory=dict)
    _position: int = -1

    def prepare(self, proposals: list[Proposed]) -> None:
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

    def apply(self, memory_id: str, proposed: Proposed, position: int = -1) -> Outcome:
        memory = proposed.memory
        self._position = position
        existing = self._duplicate(proposed) or self._restatement(proposed)
        if existing is not None:
            if said_before(existing, memory):
                return Outcome(existing.memory_id, "unchanged")
            reinforce(existing, memory, key=self.key)
            return Outcome(existing.memory_id, "reinforced")
        insert_memory(self.odb, memory_id, memory, key=self.key,
                      fingerprint=content_fingerprint(memory.type.value, memory.content),
                      subject=proposed.subject, value=proposed.value, stated=proposed.stated)
        add_event("create", [memory_id],
                  after={"type": memory.type.value, "importance": memory.importance,
                         "confidence": memory.confidence, "subject": proposed.subject},
                  actor=memory.source.captured_by.value, key=self.key)
        if proposed.vector is not None and self.fresh_matrix is not None:
            self.fresh_rows[memory_id] = len(self.fresh_ids)
            self.fresh_matrix[len(self.fresh_ids)] = proposed.vector
            self.fresh_ids.append(memory_id)
        outcome = Outcome(memory_id, "created")
        for older in self._same_subject(proposed, exclude=memory_id):
            self._link(outcome, proposed, older)
        return outcome

    # -- lookups ----------------------------------------------------------------

    def _active(self, memory_type: str) -> object:
        return (MemoryRow.type == memory_type) & (MemoryRow.status == Status.ACTIVE.value)

    def _duplicate(self, proposed: Proposed) -> MemoryRow | None:
        memory = proposed.memory
        fingerprint = content_fingerprint(memory.type.value, memory.content)
        row = (MemoryRow.select().where(self._active(memory.type.value),
                                        MemoryRow.fingerprint == fingerprint)
               .order_by(MemoryRow.id).first())
        if row is not None or proposed.vector is None:
            return row
        close = sorted(((c, m) for m, c in self._similar(proposed.vector, memory.type.value)
                        if c >= self.settings.dedup_similarity), reverse=True)
        for _, memory_id in close:
            row = MemoryRow.get_or_none(MemoryRow.memory_id == memory_id)
            if row is not None and same_gist(row.content, memory.content):
                return row
        return None

    def _restatement(self, proposed: Proposed) -> MemoryRow | None:
        if not proposed.subject or proposed.value is None:
            return None
        for row in self._same_subject(proposed, exclude=None):
            if (row.value or "") == proposed.value:
                return row
        return None

    def _same_subject(self, proposed: Proposed, exclude: str | None) -> list[MemoryRow]:
        if not proposed.subject:
            return []
        memory_type = proposed.memory.type.value
        query = (MemoryRow.select().where(self._active(memory_type),
                                          MemoryRow.subject == proposed.subject)
                 .order_by(MemoryRow.id.desc()))
        if exclude:
            query = query.where(MemoryRow.memory_id != exclude)
        rows = list(query.limit(20))
        if proposed.subject not in BROAD_SUBJECTS:
            return rows
        if proposed.vector is None:
            return []
        close = {m for m, c in self._similar(proposed.vector, memory_type, within=rows)
                 if c >= self.settings.related_similarity}
        return [r for r in rows if r.memory_id in close]

    def _similar(self, vector: np.ndarray, memory_type: str,
                 within: list[MemoryRow] | None = None) -> list[tuple[str, float]]:
        """(memoryId, cosine) of active memories of ``memory_type`` near ``vector``."""
        pairs: dict[str, float] = {}
        if within is not None:
            for row in within:
                other = self._vector_of(row.memory_id)
                if other is not None:
                    pairs[row.memory_id] = float(np.dot(vector, other))
            return list(pairs.items())
        if self._position in self.neighbours:
            pairs.update(self.neighbours[self._position])
        elif self.index is not None and len(self.index):
            pairs.update((h.memory_id, h.cosine) for h in self.index.top(vector, NEIGHBOURS))
        if self.fresh_ids and self.fresh_matrix is not None:
            cosines = dot(self.fresh_matrix[: len(self.fresh_ids)], vector)
            for j in np.argpartition(-cosines, min(NEIGHBOURS, len(cosines)) - 1)[:NEIGHBOURS]:
                pairs[self.fresh_ids[j]] = float(cosines[j])
        if not pairs:
            return []
        alive = {r.memory_id for r in MemoryRow.select(MemoryRow.memory_id).where(
            self._active(memory_type), MemoryRow.memory_id.in_(list(pairs)))}
        return [(m, c) for m, c in pairs.items() if m in alive]

    def _vector_of(self, memory_id: str) -> np.ndarray | None:
        if memory_id in self.fresh_rows and self.fresh_matrix is not None:
            return self.fresh_matrix[self.fresh_rows[memory_id]]
        if self.index is not None and memory_id in self.index.positions:
            return self.index.matrix[self.index.positions[memory_id]]
        return None

    # -- decisions --------------------------------------------------------------

    def _link(self, outcome: Outcome, proposed: Proposed, stored: MemoryRow) -> None:
        """Apply the policy between the new memory and a stored one on the same subject.

        "Newer" is decided by when each was said (``createdAt``), not by arrival order:
        a write-back redelivered late must not let an old statement win.
        """
        new_id = outcome.memory_id
        said_at = format_ts(proposed.memory.created_at or utc_now())
        if said_at >= stored.created_at:
            newer_id, older_id = new_id, stored.memory_id
            stated, confidence = proposed.stated, proposed.memory.confidence
            older_confidence = stored.confidence
        else:
            newer_id, older_id = stored.memory_id, new_id
            stated, confidence = bool(stored.stated), stored.confidence
            older_confidence = proposed.memory.confidence
        if stated and confidence >= older_confidence:
            older_row = stored if older_id == stored.memory_id else \
                MemoryRow.get(MemoryRow.memory_id == new_id)
            set_status(older_row, Status.SUPERSEDED, reason="restated by the user",
                       actor="extractor", key=self.key, by=newer_id)
            edge_type, reason = EdgeType.UPDATES, f"restates {proposed.subject}"
            outcome.superseded.append(older_id)
        else:
            edge_type, reason = EdgeType.CONTRADICTS, f"conflicts on {proposed.subject}"
            outcome.contradicted.append((newer_id, older_id))
            add_event("contradict", [newer_id, older_id],
                      after={"subject": proposed.subject}, reason=reason, actor="extractor",
                      key=self.key)
        insert_edge(self.odb, EdgeInput(from_memory_id=newer_id, to_memory_id=older_id,
                                        edge_type=edge_type, weight=1.0, reason=reason),
                    from_id=newer_id, to_id=older_id, key=self.key, actor="extractor")
