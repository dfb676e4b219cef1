"""The audit lookups of one memory search ``memory_event_ids``; none scans memory_events.

Every statement history, hard forget and said_before run is recorded from the
connection (SQLite's trace callback, parameters bound), and SQLite's own plan for each
one that reads memory_events is checked: a search by key, never a scan. The same for a
write's lookup of its nearest stored memories: by memory_id.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchmem_testing import distinct_texts, make_settings

from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.edits import Forget, apply_edit
from orchmem.models.governance.history import history
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.models.writeback.apply import write_memories


def said(conversation: str, content: str) -> MemoryInput:
    return validate(MemoryInput, {"type": "Fact", "content": content, "source": {
        "sourceType": "channel_transcript", "capturedBy": "extractor",
        "conversationId": conversation}})


@contextmanager
def statements(odb: OrchestratorDB) -> Iterator[list[str]]:
    """The statements this thread's connection runs in the block."""
    seen: list[str] = []
    connection = odb.db.connection()
    connection.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        connection.set_trace_callback(None)


def plans(odb: OrchestratorDB, seen: list[str]) -> dict[str, list[str]]:
    """SQLite's query plan of each recorded statement that reads memory_events."""
    reads = [s for s in seen if s.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE"))
             and "memory_events" in s]
    return {s: [row[3] for row in odb.sql(f"EXPLAIN QUERY PLAN {s}")] for s in reads}


def test_history_forget_and_said_before_search_the_event_index(tmp_path: Path) -> None:
    odb = Databases(make_settings(tmp_path, "")).open("plans")
    assert odb is not None
    for key, conversation in (("k1", "conv-a"), ("k2", "conv-b")):
        result = write_memories(odb, key=key, task="t",
                                memories=[said(conversation, "The office is in Porto")])
    memory_id = result["reinforced"][0]
    with statements(odb) as seen:
        history(odb, memory_id, EVERYTHING)
        with odb.read():
            stored = memories.get(memory_id)
            assert stored is not None
            assert memories.said_before(stored, said("conv-b", "The office is in Porto"))
        apply_edit(odb, Forget(op="forget", memory_id=memory_id, hard=True), key="f",
                   task="edit")
    found = plans(odb, seen)
    assert {s: p for s, p in found.items() if any(d.startswith("SCAN") for d in p)} == {}
    lookups = [s for s in found if "memory_event_ids" in s]
    # history, said_before and the forget's scrub each look the memory up once.
    assert len(lookups) == 3, list(found)
    # memory_events has no memory_id column: this is the primary key of memory_event_ids.
    by_memory = re.compile(r"SEARCH \w+ USING PRIMARY KEY \(memory_id=\?\)")
    assert all(any(by_memory.fullmatch(d) for d in found[s]) for s in lookups)


def test_a_writes_neighbour_check_looks_its_candidates_up_by_memory_id(
        tmp_path: Path, embedder: Embedder) -> None:
    """The nearest stored memories of a new one are read by id (the unique memory_id
    index), not by scanning every active memory of the type with the (status, type)
    index, which grows with the file."""
    odb = Databases(make_settings(tmp_path, "")).open("neighbours")
    assert odb is not None
    texts = distinct_texts(30, seed=53)
    vectors = embedder.encode(texts)
    write_memories(odb, key="k-many", task="t", memories=[said("c", t) for t in texts[:-1]],
                   vectors=list(vectors[:-1]), embedder=embedder.version)
    with statements(odb) as seen:
        write_memories(odb, key="k-one", task="t", memories=[said("c", texts[-1])],
                       vectors=[vectors[-1]], embedder=embedder.version)
    by_ids = [s for s in seen if s.lstrip().upper().startswith("SELECT")
              and re.search(r"FROM memories WHERE .* memory_id IN \('", s)]
    assert by_ids, seen
    for statement in by_ids:
        plan = [row[3] for row in odb.sql(f"EXPLAIN QUERY PLAN {statement}")]
        assert any(d.startswith("SEARCH memories USING INDEX memories_memory_id")
                   for d in plan), (statement, plan)
