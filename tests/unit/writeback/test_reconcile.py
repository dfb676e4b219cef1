"""The update/contradiction policy over values: no database, no model."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from orchmem.config.memory_settings import WritebackSettings
from orchmem.models.core.shapes import (
    CapturedBy,
    EdgeType,
    MemoryInput,
    MemoryType,
    Source,
    SourceType,
    content_fingerprint,
)
from orchmem.models.storage.memories.rows import StoredMemory
from orchmem.models.writeback.reconcile import Proposed, decide, link, related

SETTINGS = WritebackSettings()
SAID = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EARLIER = "2026-02-01T12:00:00.000000Z"


def proposed(content: str, *, memory_type: MemoryType = MemoryType.IDENTITY,
             subject: str | None = None, value: str | None = None, stated: bool = False,
             confidence: float = 0.9, vector: np.ndarray | None = None) -> Proposed:
    source = Source.model_construct(source_type=SourceType.CHANNEL_TRANSCRIPT,
                                    source_path=None, conversation_id="c1",
                                    workflow_run_id=None, step_id=None,
                                    captured_by=CapturedBy.EXTRACTOR)
    memory = MemoryInput.model_construct(type=memory_type, content=content, summary=None,
                                         importance=50, confidence=confidence, source=source,
                                         created_at=SAID, key=None)
    return Proposed(memory=memory, vector=vector, subject=subject, value=value, stated=stated)


def stored(memory_id: str, content: str, *, memory_type: MemoryType = MemoryType.IDENTITY,
           subject: str | None = None, value: str | None = None, stated: bool = False,
           confidence: float = 0.9, created_at: str = EARLIER) -> StoredMemory:
    return StoredMemory(memory_id=memory_id, type=memory_type.value, content=content,
                        importance=50, confidence=confidence, status="active",
                        subject=subject, value=value,
                        fingerprint=content_fingerprint(memory_type.value, content),
                        stated=stated, reinforcements=0, forgotten=False,
                        created_at=created_at)


def never(_: StoredMemory) -> bool:
    return False


def test_exact_duplicate_is_reinforced() -> None:
    old = stored("m-1", "My name is Sam.")
    decision = decide(proposed("My name is Sam."), duplicate=old, similar=[],
                      same_subject=[], settings=SETTINGS, holds=never)
    assert (decision.action, decision.existing) == ("reinforce", old)


def test_same_statement_from_the_same_place_changes_nothing() -> None:
    old = stored("m-1", "My name is Sam.")
    decision = decide(proposed("My name is Sam."), duplicate=old, similar=[],
                      same_subject=[], settings=SETTINGS, holds=lambda m: m is old)
    assert (decision.action, decision.existing) == ("unchanged", old)


def test_same_subject_same_value_is_a_restatement() -> None:
    old = stored("m-1", "My name is Sam.", subject="identity:name", value="sam")
    decision = decide(proposed("Call me Sam", subject="identity:name", value="sam"),
                      duplicate=None, similar=[], same_subject=[(old, None)],
                      settings=SETTINGS, holds=never)
    assert (decision.action, decision.existing) == ("reinforce", old)


def test_user_stated_new_value_updates_the_older_memory() -> None:
    old = stored("m-1", "I live in Porto.", subject="identity:location", value="porto")
    new = proposed("I live in Lisbon now", subject="identity:location", value="lisbon",
                   stated=True)
    decision = decide(new, duplicate=None, similar=[], same_subject=[(old, None)],
                      settings=SETTINGS, holds=never)
    assert (decision.action, decision.related) == ("create", (old,))
    edge = link(new, "m-2", old)
    assert (edge.newer_id, edge.older_id, edge.edge_type) == ("m-2", "m-1", EdgeType.UPDATES)
    assert edge.supersedes


def test_hedged_new_value_contradicts_instead() -> None:
    old = stored("m-1", "I live in Porto.", subject="identity:location", value="porto")
    new = proposed("I think I live in Lisbon", subject="identity:location", value="lisbon",
                   stated=False)
    edge = link(new, "m-2", old)
    assert (edge.newer_id, edge.older_id, edge.edge_type) == ("m-2", "m-1",
                                                               EdgeType.CONTRADICTS)
    assert not edge.supersedes


def test_a_late_older_statement_does_not_win() -> None:
    later = stored("m-1", "I live in Lisbon now", subject="identity:location",
                   value="lisbon", stated=True, created_at="2026-04-01T00:00:00.000000Z")
    late = proposed("I live in Porto", subject="identity:location", value="porto",
                    stated=True)
    edge = link(late, "m-2", later)
    assert (edge.newer_id, edge.older_id, edge.edge_type) == ("m-1", "m-2", EdgeType.UPDATES)


def test_near_duplicate_with_the_same_gist_is_reinforced() -> None:
    old = stored("m-1", "I prefer aisle seats.", memory_type=MemoryType.PREFERENCE)
    new = proposed("I really prefer aisle seats!", memory_type=MemoryType.PREFERENCE,
                   vector=np.ones(4, dtype=np.float32))
    decision = decide(new, duplicate=None, similar=[(old, 0.97)], same_subject=[],
                      settings=SETTINGS, holds=never)
    assert (decision.action, decision.existing) == ("reinforce", old)


def test_close_vectors_with_other_numbers_stay_two_memories() -> None:
    old = stored("m-1", "The door code is 3468", memory_type=MemoryType.FACT)
    new = proposed("The door code is 8082", memory_type=MemoryType.FACT,
                   vector=np.ones(4, dtype=np.float32))
    decision = decide(new, duplicate=None, similar=[(old, 0.99)], same_subject=[],
                      settings=SETTINGS, holds=never)
    assert decision.action == "create"


def test_below_the_dedup_threshold_is_a_new_memory() -> None:
    old = stored("m-1", "I prefer aisle seats.", memory_type=MemoryType.PREFERENCE)
    new = proposed("I really prefer aisle seats!", memory_type=MemoryType.PREFERENCE,
                   vector=np.ones(4, dtype=np.float32))
    decision = decide(new, duplicate=None, similar=[(old, SETTINGS.dedup_similarity - 0.01)],
                      same_subject=[], settings=SETTINGS, holds=never)
    assert (decision.action, decision.existing, decision.related) == ("create", None, ())


def test_broad_subject_links_only_close_vectors() -> None:
    tea = stored("m-1", "I prefer coffee", memory_type=MemoryType.PREFERENCE,
                 subject="prefer", value="coffee")
    seats = stored("m-2", "I prefer window seats", memory_type=MemoryType.PREFERENCE,
                   subject="prefer", value="window seats")
    new = proposed("I prefer tea", memory_type=MemoryType.PREFERENCE, subject="prefer",
                   value="tea", vector=np.ones(4, dtype=np.float32))
    pairs: list[tuple[StoredMemory, float | None]] = [(tea, 0.8), (seats, 0.2)]
    assert related(new, pairs, SETTINGS.related_similarity) == [tea]
    without_vector = proposed("I prefer tea", memory_type=MemoryType.PREFERENCE,
                              subject="prefer", value="tea")
    assert related(without_vector, pairs, SETTINGS.related_similarity) == []
