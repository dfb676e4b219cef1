"""Recall's full-text side on a helper thread while the query embeds (models/recall/overlap.py),
on real SQLite files and the real MiniLM model: the same answers as in turn, one
snapshot, errors as before, a setting to turn it off, threads stopped on close."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings, unique_id

from orchmem.config import Settings, StorageError
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.edits import Forget, Supersede, apply_edit
from orchmem.models.recall.overlap import Overlap
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.memories.validity_columns import has_time
from orchmem.models.writeback.apply import write_memories
from orchmem.worker import MemoryClient

#: One clock for both recalls (recency is a function of it).
NOW = datetime.now(UTC)
MANUAL = {"sourceType": "manual", "capturedBy": "user"}
CONTENTS = [
    "Caroline: I went to the LGBTQ support group yesterday", "Melanie: We went camping in June",
    "The user prefers green tea in the morning", "Ship the billing migration by Friday",
    "Caroline: I'm researching adoption agencies", "Melanie: I painted a lake sunrise last year",
    "We decided to move the retro to Thursdays", "The staging deploy failed on the migration",
    "Caroline: the transgender stories were so inspiring", "Melanie: my kids love the beach",
    "Budget reviews happen every quarter", "The printer on floor two is broken",
]
QUESTIONS = ["What did Caroline research?", "When did Melanie go camping?",
             "what does the user drink in the morning", "billing migration deadline",
             "Caroline support group", "zebra quantum submarine", "What did we decide?",
             # a dated phrase: the router's window list, its candidates read on the helper
             "What did Caroline do yesterday?"]


def settings(root: Path, *, overlap: bool = True, cache: int = 0) -> Settings:
    return make_settings(root, "", embedding={"query_cache_size": cache},
                         memory={"retrieval": {"overlap": overlap}})


def seed(odb: OrchestratorDB, embedder: Embedder) -> None:
    memories = [validate(MemoryInput, {"type": "Fact", "source": MANUAL, "content": c},
                         workspace=odb.workspace) for c in CONTENTS]
    write_memories(odb, key="seed", task="t", memories=memories,
                   vectors=list(embedder.encode(CONTENTS)), embedder=embedder.version)


def answer(bundle: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = bundle.dump()
    dumped.pop("tookMs")
    return dumped


def test_overlapped_recall_answers_exactly_as_the_recall_in_turn(
        tmp_path: Path, embedder: Embedder) -> None:
    beside, in_turn = Databases(settings(tmp_path)), Databases(settings(tmp_path, overlap=False))
    seed(beside.open("same"), embedder)
    for route in (True, False):
        for question in QUESTIONS:
            overlapped = recall("same", question, databases=beside, route=route, now=NOW)
            sequential = recall("same", question, databases=in_turn, route=route, now=NOW)
            assert answer(overlapped) == answer(sequential), (question, route)
    assert beside.overlap.running  # the helper did the full-text side
    assert not in_turn.overlap.running  # off: no thread was started
    beside.close_all()
    in_turn.close_all()


def test_a_cached_query_vector_or_a_text_only_recall_uses_no_helper(
        tmp_path: Path, embedder: Embedder) -> None:
    databases = Databases(settings(tmp_path, cache=16))
    seed(databases.open("cached"), embedder)
    recall("cached", "green tea", databases=databases, mode="text")
    assert not databases.overlap.running
    recall("cached", "green tea", databases=databases)  # runs the model: the helper starts
    assert databases.overlap.running
    databases.close_all()
    assert not databases.overlap.running
    recall("cached", "green tea", databases=databases)  # its vector is kept: no model run
    assert not databases.overlap.running
    databases.close_all()


def test_an_error_on_the_helper_thread_surfaces_as_in_turn_and_leaves_no_transaction(
        tmp_path: Path, embedder: Embedder) -> None:
    beside, in_turn = Databases(settings(tmp_path)), Databases(settings(tmp_path, overlap=False))
    odb = beside.open("broken")
    seed(odb, embedder)
    raw = sqlite3.connect(odb.workspace.db_path)
    with raw:  # the full-text index goes; the memories stay
        raw.execute("DROP TABLE memory_fts")
    raw.close()
    errors = []
    for databases in (beside, in_turn):
        with pytest.raises(StorageError) as caught:
            recall("broken", "green tea in the morning", databases=databases, route=False)
        errors.append(str(caught.value))
        assert not databases.open("broken").db.in_transaction()
    assert errors[0] == errors[1] and "no such table: memory_fts" in errors[0]
    assert beside.overlap.running
    bundle = recall("broken", "tea", databases=beside, mode="vector", route=False)  # still works
    assert bundle.nodes
    beside.close_all()
    in_turn.close_all()


def test_a_borrowed_connection_reads_the_lenders_snapshot(
        tmp_path: Path, embedder: Embedder) -> None:
    databases = Databases(settings(tmp_path))
    odb = databases.open("snap")
    seed(odb, embedder)
    writer = Databases(settings(tmp_path)).open("snap")
    count = "SELECT count(*) FROM memories"
    with odb.snapshot(), databases.overlap.helper() as helper:
        assert helper is not None
        before = odb.sql(count)[0][0]
        write_memories(writer, key="later", task="t", memories=[validate(
            MemoryInput, {"type": "Fact", "source": MANUAL, "content": "A later memory"},
            workspace=writer.workspace)], vectors=list(embedder.encode(["A later memory"])),
            embedder=embedder.version)
        seen = helper.run(odb.borrowing(lambda: odb.sql(count)[0][0])).result()
        refused = helper.run(odb.borrowing(lambda: odb.meta("schema_version")))
        with pytest.raises(RuntimeError, match="sql\\(\\) only"):
            refused.result()
    assert seen == before == len(CONTENTS)
    assert odb.sql(count)[0][0] == len(CONTENTS) + 1  # a new snapshot sees the write
    with pytest.raises(RuntimeError, match="open snapshot"):
        odb.borrowing(lambda: None)
    databases.close_all()


def test_a_snapshot_asks_the_files_columns_once_and_lends_the_answer(
        tmp_path: Path, embedder: Embedder) -> None:
    databases = Databases(settings(tmp_path))
    odb = databases.open("memo")
    seed(odb, embedder)
    asked: list[str] = []
    odb.db.connection().set_trace_callback(
        lambda statement: asked.append(statement) if "pragma_table_info" in statement else None)
    with odb.snapshot(), databases.overlap.helper() as helper:
        assert helper is not None
        assert has_time(odb) and has_time(odb)
        assert helper.run(odb.borrowing(lambda: has_time(odb))).result()
        with odb.snapshot():  # nested: the same snapshot, the same answer
            assert has_time(odb)
    assert len(asked) == 1
    assert odb.memo() is None  # gone with the snapshot: the next one asks again
    with odb.snapshot():
        assert has_time(odb)
    assert has_time(odb)  # outside a snapshot: asked every time
    assert len(asked) == 3
    # a job run on the lender's own thread (the helpers shut down) leaves its memo alone
    with odb.snapshot():
        memo = odb.memo()
        odb.borrowing(lambda: has_time(odb))()
        assert odb.memo() is memo
    databases.close_all()


def test_every_helper_busy_means_the_caller_does_it_itself() -> None:
    overlap = Overlap(threads=2)
    with overlap.helper() as first, overlap.helper() as second, overlap.helper() as third:
        assert first is not None and second is not None and third is None
        names = {first.run(lambda: threading.current_thread().name).result(),
                 second.run(lambda: threading.current_thread().name).result()}
        assert all(n.startswith("orchmem-overlap") for n in names)
    with overlap.helper() as again:
        assert again is not None  # released at the end of the block
    overlap.shutdown()
    assert not overlap.running


def test_the_client_stops_its_helper_threads_on_close(
        tmp_path: Path, embedder: Embedder) -> None:
    # Only this client's helpers: clients of earlier tests may still hold theirs.
    earlier = set(threading.enumerate())
    with MemoryClient(unique_id("overlap"), settings(tmp_path), immediate=True) as client:
        seed(client.databases.open(client.orchestrator_id), embedder)
        assert client.recall("green tea", wait_for_writes=False).nodes
        assert client.databases.overlap.running
        helpers = [t for t in threading.enumerate()
                   if t.name.startswith("orchmem-overlap") and t not in earlier]
        assert helpers
    assert not client.databases.overlap.running
    assert not any(t.is_alive() for t in helpers)
    assert client.recall("green tea", wait_for_writes=False).nodes  # usable again
    client.close()


def test_overlapped_recalls_see_every_write_made_between_them(
        tmp_path: Path, embedder: Embedder) -> None:
    # The helper refreshes the vector index ahead of the vector (models/recall/search.py
    # _index_ahead); the vector side must then answer from that refresh, never a stale one.
    databases = Databases(settings(tmp_path))
    odb = databases.open("fresh")
    seed(odb, embedder)
    question = "Which bakery sells the rye sourdough?"
    assert recall("fresh", question, databases=databases, now=NOW).memory_ids == []
    bakery = "Hoffmann's bakery on Elm Street sells the best rye sourdough"
    write_memories(odb, key="bakery", task="t", memories=[validate(
        MemoryInput, {"type": "Fact", "source": MANUAL, "content": bakery},
        workspace=odb.workspace)], vectors=[embedder.encode_one(bakery)],
        embedder=embedder.version)
    found = recall("fresh", question, databases=databases, now=NOW)
    first = found.memory_ids[0]
    assert found.nodes[0].memory.content == bakery
    assert found.nodes[0].scores.vector_rank == 1  # the vector side found it too
    moved = "The rye sourdough is now sold by the Elm Street market stall"
    apply_edit(odb, Supersede(op="supersede", memory_id=first, content=moved),
               key="moved", task="edit")
    after = recall("fresh", question, databases=databases, now=NOW)
    assert first not in after.memory_ids
    newer = [n.memory for n in after.nodes if n.memory.content == moved]
    assert newer, after.memory_ids
    apply_edit(odb, Forget(op="forget", memory_id=newer[0].memory_id, hard=True),
               key="gone", task="edit")
    gone = recall("fresh", question, databases=databases, now=NOW)
    assert newer[0].memory_id not in gone.memory_ids and first not in gone.memory_ids
    assert databases.overlap.running  # every recall above ran the model beside the helper
    databases.close_all()
