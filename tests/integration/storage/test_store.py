"""The storage layer on real SQLite files: layout, pragmas, transactions, isolation."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from orchmem_testing import make_settings

from orchmem.config import MemoryNotFound, MemoryValidationError, ScopeViolation, StorageError
from orchmem.models.core.shapes import EdgeInput, MemoryInput, derive_id, validate
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.db.stats import stats
from orchmem.models.storage.delivery.receipts import begin
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.storage.schema.tables import SCHEMA_VERSION
from orchmem.models.writeback.apply import write_memories

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


@pytest.fixture
def databases(tmp_path: Path) -> Databases:
    return Databases(make_settings(tmp_path, ""))


def mem(content: str, memory_type: str = "Fact", **extra: object) -> MemoryInput:
    return validate(MemoryInput, {"type": memory_type, "content": content, "source": MANUAL,
                                  **extra})


def test_first_use_creates_the_folder_layout_and_schema(databases: Databases,
                                                        tmp_path: Path) -> None:
    odb = databases.open("orch-a")
    memory = tmp_path / "orchestrators" / "orch-a" / "memory"
    for sub in ("memory.db", "ingest", "ingest/processed", "ingest/rejected", "bulletins", "logs"):
        assert (memory / sub).exists(), sub
    assert odb.meta("schema_version") == str(SCHEMA_VERSION)
    assert odb.meta("orchestrator_id") == "orch-a"
    with odb.bound():
        pragma = {name: odb.db.execute_sql(f"PRAGMA {name}").fetchone()[0]
                  for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")}
    assert pragma["journal_mode"] == "wal"
    assert pragma["foreign_keys"] == 1
    assert pragma["busy_timeout"] == 10_000
    assert pragma["synchronous"] == 2  # FULL
    tables = {r[0] for r in sqlite3.connect(memory / "memory.db").execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table')")}
    assert {"memories", "memory_edges", "memory_sources", "memory_embeddings", "memory_fts",
            "memory_events", "task_receipts", "ingest_manifest", "meta"} <= tables


def test_reader_does_not_create_a_database(databases: Databases, tmp_path: Path) -> None:
    assert databases.open("orch-a", create=False) is None
    assert not (tmp_path / "orchestrators" / "orch-a").exists()


def test_typed_nodes_and_edges_persist_with_provenance(databases: Databases) -> None:
    odb = databases.open("orch-a")
    edge = validate(EdgeInput, {"fromMemoryId": "d", "toMemoryId": "g", "edgeType": "CausedBy",
                                "weight": 0.7, "reason": "the goal drove it"})
    result = write_memories(odb, key="k1", task="t", memories=[
        mem("Ship v2 by June", "Goal", key="g", importance=90),
        mem("Use SQLite per orchestrator", "Decision", key="d", confidence=1.0),
    ], edges=[edge])
    assert len(result["created"]) == 2 and len(result["edgeIds"]) == 1
    nodes = {n.type.value: n for n in list_memories(odb)}
    assert nodes["Goal"].importance == 90
    assert nodes["Decision"].source.source_type.value == "manual"
    with odb.bound():
        row = odb.db.execute_sql("SELECT from_memory_id, to_memory_id, edge_type, weight, reason "
                                 "FROM memory_edges").fetchone()
        sources = odb.db.execute_sql("SELECT count(*) FROM memory_sources").fetchone()[0]
        fts = odb.db.execute_sql("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH 'june'"
                                 ).fetchone()[0]
    assert row == (nodes["Decision"].memory_id, nodes["Goal"].memory_id, "CausedBy", 0.7,
                   "the goal drove it")
    assert sources == 2
    assert fts == 1


def test_same_key_twice_writes_once_and_returns_the_same_ids(databases: Databases) -> None:
    odb = databases.open("orch-a")
    first = write_memories(odb, key="same", task="t", memories=[mem("Alpha")])
    second = write_memories(odb, key="same", task="t", memories=[mem("Alpha")])
    assert second["memoryIds"] == first["memoryIds"]
    assert second["duplicate"] is True
    assert stats(odb)["memories"] == 1


def test_a_failing_write_leaves_nothing_behind(databases: Databases) -> None:
    odb = databases.open("orch-a")
    edge = validate(EdgeInput, {"fromMemoryId": "a", "toMemoryId": "nobody",
                                "edgeType": "RelatedTo"})
    with pytest.raises(MemoryValidationError, match="neither a memoryId nor the key"):
        write_memories(odb, key="k", task="t", memories=[mem("A", key="a")], edges=[edge])
    missing = validate(EdgeInput, {"fromMemoryId": "a",
                                   "toMemoryId": derive_id("m", "orch-a", "x", 0),
                                   "edgeType": "RelatedTo"})
    with pytest.raises(MemoryNotFound):
        write_memories(odb, key="k", task="t", memories=[mem("A", key="a")], edges=[missing])
    data = stats(odb)
    assert data["memories"] == 0 and data["receipts"] == 0 and data["events"] == 0
    with odb.bound():
        assert odb.db.execute_sql("SELECT count(*) FROM memory_fts").fetchone()[0] == 0


def test_edge_to_another_orchestrators_memory_is_a_scope_violation(databases: Databases) -> None:
    odb = databases.open("orch-a")
    foreign = validate(EdgeInput, {"fromMemoryId": "a",
                                   "toMemoryId": derive_id("m", "orch-b", "k", 0),
                                   "edgeType": "RelatedTo"})
    with pytest.raises(ScopeViolation):
        write_memories(odb, key="k", task="t", memories=[mem("A", key="a")], edges=[foreign])
    assert stats(odb)["memories"] == 0


def test_two_orchestrators_have_two_files_and_never_see_each_others_rows(
        databases: Databases, tmp_path: Path) -> None:
    a, b = databases.open("orch-a"), databases.open("orch-b")
    write_memories(a, key="k", task="t", memories=[mem("secret of A")])
    write_memories(b, key="k", task="t", memories=[mem("secret of B")])
    assert a.workspace.db_path != b.workspace.db_path
    assert [n.content for n in list_memories(a)] == ["secret of A"]
    assert [n.content for n in list_memories(b)] == ["secret of B"]
    raw = sqlite3.connect(b.workspace.db_path).execute("SELECT content FROM memories").fetchall()
    assert raw == [("secret of B",)]


def test_a_restated_memory_reinforces_instead_of_duplicating(databases: Databases) -> None:
    odb = databases.open("orch-a")
    first = write_memories(odb, key="k1", task="t", memories=[mem("I prefer tea", "Preference",
                                                                  confidence=0.6)])
    second = write_memories(odb, key="k2", task="t", memories=[mem("i PREFER tea!", "Preference",
                                                                   confidence=0.6)])
    assert second["reinforced"] == first["memoryIds"]
    [node] = list_memories(odb)
    assert node.confidence == pytest.approx(0.6 + 0.4 * 0.3)
    with odb.bound():
        assert odb.db.execute_sql("SELECT count(*) FROM memory_sources").fetchone()[0] == 2


def test_receipt_commits_in_the_same_transaction_as_the_data(databases: Databases) -> None:
    odb = databases.open("orch-a")
    write_memories(odb, key="k", task="t", memories=[mem("A")])
    with odb.bound():
        status, result = odb.db.execute_sql(
            "SELECT status, result FROM task_receipts WHERE key='k'").fetchone()
    assert status == "done"
    assert json.loads(result)["created"]


def test_a_delivery_count_commits_without_the_fsync_and_leaves_full_behind(
        databases: Databases) -> None:
    odb = databases.open("orch-a")

    def synchronous() -> int:
        return int(odb.db.execute_sql("PRAGMA synchronous").fetchone()[0])

    with odb.write(durable=False):
        during = synchronous()
        with odb.write(durable=False):  # nested: the outer transaction decides
            assert synchronous() == during
        begin(odb, "k", "t")
    assert (during, synchronous()) == (1, 2)  # NORMAL for the count, FULL again after
    other = sqlite3.connect(odb.workspace.db_path)  # committed, seen by another reader
    assert other.execute("SELECT status, deliveries FROM task_receipts WHERE key = 'k'"
                         ).fetchone() == ("started", 1)
    other.close()
    with pytest.raises(RuntimeError), odb.write(durable=False):
        raise RuntimeError("rolled back")
    assert synchronous() == 2


def test_handle_refuses_use_in_a_forked_child(databases: Databases) -> None:
    odb = databases.open("orch-a")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with odb.bound():
                odb.db.execute_sql("SELECT 1")
        except StorageError:
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert databases.open("orch-a") is odb  # the parent's handle still works
