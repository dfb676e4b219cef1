"""The storage contract: what every named operation of ``models/storage`` promises.

One test per concept, run against every implementation in ``IMPLEMENTATIONS`` (huey's
``StorageTests`` pattern). Today the one implementation is SQLite on a real file; a
second (in memory, another engine) must pass the same tests. No model here: vectors
are small deterministic unit vectors.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from orchmem_testing import free_port, make_settings

from orchmem.models.core.shapes import EdgeInput, MemoryInput, Status, derive_id, validate
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.delivery import deadletters, manifest, receipts
from orchmem.models.storage.delivery.outbox import Outbox, prune_done
from orchmem.models.storage.memories import edges, events
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.memories.forget import erase_row
from orchmem.models.storage.search import fts, vectors

IMPLEMENTATIONS = ["sqlite"]
ORCH = "contract"
MANUAL = {"sourceType": "manual", "capturedBy": "user"}


@pytest.fixture(params=IMPLEMENTATIONS)
def odb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OrchestratorDB]:
    assert request.param == "sqlite"
    settings = make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0")
    databases = Databases(settings)
    opened = databases.open(ORCH)
    assert opened is not None
    yield opened
    databases.close_all()


def unit(seed: int, dim: int = 8) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def add(odb: OrchestratorDB, n: int, content: str, memory_type: str = "Fact",
        subject: str | None = None, value: str | None = None) -> str:
    memory_id = derive_id("m", ORCH, "k", n)
    memory = validate(MemoryInput, {"type": memory_type, "content": content,
                                    "source": MANUAL}, workspace=odb.workspace)
    with odb.write():
        memories.insert_memory(memory_id, memory, key=f"k-{n}", subject=subject, value=value)
        events.add_event("create", [memory_id], key=f"k-{n}")
    return memory_id


def test_memories_are_found_by_id_fingerprint_and_subject(odb: OrchestratorDB) -> None:
    first = add(odb, 1, "The user's city is Porto", "Identity", "identity:city", "porto")
    second = add(odb, 2, "The user's city is Lyon", "Identity", "identity:city", "lyon")
    with odb.read():
        stored = memories.get(first)
        assert stored is not None and stored.status == Status.ACTIVE.value
        assert memories.exists(second) and not memories.exists(derive_id("m", ORCH, "x", 0))
        assert memories.find_duplicate("Identity", stored.fingerprint) == stored
        subject = memories.same_subject("Identity", "identity:city", exclude=first)
        assert [m.memory_id for m in subject] == [second]
        assert set(memories.active_among("Identity", [first, second, "m-none"])) == \
            {first, second}
    with odb.write():
        memories.set_status(stored, Status.SUPERSEDED, reason="moved", actor="user",
                            key="k-3", by=second)
    assert [n.status for n in memories.get_nodes(odb, [second, first])] == \
        [Status.ACTIVE, Status.SUPERSEDED]
    assert [n.memory_id for n in memories.list_memories(odb)] == [second]


def test_an_edge_is_created_once_and_audited_once(odb: OrchestratorDB) -> None:
    a, b = add(odb, 1, "Alpha launched"), add(odb, 2, "Beta followed")
    edge = validate(EdgeInput, {"fromMemoryId": a, "toMemoryId": b, "edgeType": "CausedBy",
                                "weight": 0.5}, workspace=odb.workspace)
    with odb.write():
        first = edges.insert_edge(odb, edge, from_id=a, to_id=b, key="e-1", actor="user")
        again = edges.insert_edge(odb, edge, from_id=a, to_id=b, key="e-2", actor="user")
    assert first == again
    before = events.watermark(odb)
    with odb.write():
        edges.insert_edge(odb, edge, from_id=a, to_id=b, key="e-3", actor="user")
    assert events.watermark(odb) == before


def test_vectors_are_searched_refreshed_and_found_stale(odb: OrchestratorDB) -> None:
    ids = [add(odb, i, f"note number {i}") for i in range(5)]
    assert vectors.count_stale(odb, "toy-1") == 5
    with odb.write():
        vectors.store_embeddings([(m, unit(i)) for i, m in enumerate(ids[:4])], "toy-1")
    assert vectors.count_stale(odb, "toy-1") == 1
    assert vectors.stale(odb, "toy-1", 10) == [(ids[4], "note number 4")]
    hits, searched = vectors.search(odb, unit(2), embedder="toy-1", limit=2)
    assert searched == 4 and hits[0].memory_id == ids[2]
    with odb.write():
        vectors.delete_embedding(ids[2])
    hits, searched = vectors.search(odb, unit(2), embedder="toy-1", limit=2)
    assert searched == 3 and ids[2] not in [h.memory_id for h in hits]


def test_full_text_finds_words_and_honours_status_and_forgetting(odb: OrchestratorDB) -> None:
    kept = add(odb, 1, "The deploy key rotates every Tuesday")
    erased = add(odb, 2, "The vault combination is saffron")
    assert [h.memory_id for h in fts.search(odb, "tuesday deploy", limit=5,
                                            statuses=["active"])] == [kept]
    assert fts.search(odb, "tuesday", limit=5, statuses=["retracted"]) == []
    with odb.write():
        erase_row(erased)
    assert fts.search(odb, "saffron vault", limit=5,
                      statuses=["active", "retracted", "superseded"]) == []
    assert memories.get_nodes(odb, [erased]) == []


def test_events_number_the_audit_log_and_set_the_watermark(odb: OrchestratorDB) -> None:
    with odb.write():
        first = events.add_event("note", [], actor="system")
        second = events.add_event("note", [], actor="system")
    assert second > first and events.watermark(odb) == second


def test_the_receipt_protocol(odb: OrchestratorDB) -> None:
    assert receipts.begin(odb, "r-1", "t").deliveries == 1
    assert receipts.begin(odb, "r-1", "t").deliveries == 2
    receipts.release(odb, "r-1")
    assert receipts.begin(odb, "r-1", "t").deliveries == 2
    assert receipts.status(odb, "r-1") == receipts.STARTED
    receipts.complete(odb, "r-1", {"ok": True, "n": 1})
    receipts.complete(odb, "r-1", {"ok": True, "n": 2})  # the first outcome stands
    delivery = receipts.begin(odb, "r-1", "t")
    assert delivery.finished and delivery.result == {"ok": True, "n": 1}
    receipts.reject(odb, "r-2", {"ok": False})
    assert receipts.status(odb, "r-2") == receipts.REJECTED
    with odb.write():
        assert receipts.final_result_in_transaction("r-1") == {"ok": True, "n": 1}
        assert receipts.final_result_in_transaction("r-3") is None
        for i in range(1200):  # more keys than one IN list holds
            receipts.finish(f"bulk-{i}", receipts.DONE, {"ok": True})
    keys = [f"bulk-{i}" for i in range(1200)] + ["r-1", "r-2", "unknown"]
    assert receipts.final_keys(odb, keys) == set(keys) - {"unknown"}
    assert receipts.remove_finished_before(odb, "9999") == 1202
    assert receipts.status(odb, "r-1") is None


def test_a_dead_letter_is_parked_listed_and_released(odb: OrchestratorDB) -> None:
    receipts.begin(odb, "d-1", "t")
    deadletters.dead_letter(odb, "d-1", "t", {"payload": {"x": 1}}, 4, "crashed 4 times")
    assert receipts.status(odb, "d-1") == receipts.DEAD
    [letter] = deadletters.dead_letters(odb)
    assert letter["key"] == "d-1" and letter["deliveries"] == 4
    assert deadletters.release_dead_letter(odb, "d-1") == {"task": "t",
                                                            "payload": {"payload": {"x": 1}}}
    assert receipts.status(odb, "d-1") is None and deadletters.count(odb) == 0
    assert deadletters.release_dead_letter(odb, "d-1") is None


def test_dead_letters_holding_a_text_are_erased_in_either_spelling(odb: OrchestratorDB) -> None:
    for key, text in (("d-plain", "Café at noon"), ("d-other", "nothing to see")):
        deadletters.dead_letter(odb, key, "t", {"payload": {"content": text}}, 4, "crashed")
    with odb.write():
        # Stored as JSON with ASCII escapes ("Caf\\u00e9"): found all the same.
        assert deadletters.erase_mentioning(["Café at noon", ""]) == 1
    assert [d["key"] for d in deadletters.dead_letters(odb)] == ["d-other"]


def test_the_ingest_manifest(odb: OrchestratorDB) -> None:
    row = manifest.record_outcome(odb, "a.md", "sha-a", 10, "ingested", ["m-1"])
    manifest.record_outcome(odb, "b.md", "sha-b", 5, "rejected", [], reason="empty")
    entry = manifest.latest_ingested(odb, "sha-a")
    assert entry is not None and entry.file_name == "a.md"
    assert manifest.latest_ingested(odb, "sha-b") is None
    assert [r for r, _ in manifest.pending_moves(odb)] == [row, row + 1]
    manifest.mark_moved(odb, [row])
    assert [r for r, _ in manifest.pending_moves(odb)] == [row + 1]
    manifest.record_outcome(odb, "a2.md", "sha-a", 10, "duplicate", ["m-1"])
    manifest.record_outcome(odb, "c.md", "sha-c", 7, "ingested", ["m-10"])
    with odb.read():
        assert manifest.hashes_of("m-1") == {"sha-a": 10}


def test_an_outbox_record_is_synced_and_its_publish_mark_is_not(tmp_path: Path) -> None:
    # The request must survive a power loss before it leaves; its mark need not (a lost
    # mark means one more, idempotent, publish by the reconciler).
    outbox = Outbox(tmp_path / "outbox.db")
    try:
        outbox.record("o-0", "t", {"idempotencyKey": "o-0"})  # opens the connection
        assert outbox._db is not None
        connection = outbox._db.connection()
        modes: list[tuple[str, int]] = []

        def traced(statement: str) -> None:
            if statement.startswith(("INSERT", "UPDATE")):
                mode = connection.execute("PRAGMA synchronous").fetchone()[0]
                modes.append((statement.split()[0], int(mode)))

        connection.set_trace_callback(traced)
        outbox.record("o-1", "t", {"idempotencyKey": "o-1"})
        outbox.mark_published("o-1")
        outbox.record("o-2", "t", {"idempotencyKey": "o-2"})
        connection.set_trace_callback(None)
        assert modes == [("INSERT", 2), ("UPDATE", 1), ("INSERT", 2)]  # FULL, NORMAL, FULL
        assert [e.key for e in outbox.never_published()] == ["o-0", "o-2"]
    finally:
        outbox.close()


def test_the_outbox_keeps_requests_until_their_receipt_is_final(
        odb: OrchestratorDB, tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.db")
    try:
        for i in range(1200):
            outbox.record(f"o-{i}", "t", {"idempotencyKey": f"o-{i}", "n": i})
        outbox.record("o-0", "t", {"changed": True})  # a second record of a key: no-op
        assert outbox.entries()[0].payload == {"idempotencyKey": "o-0", "n": 0}
        assert len(outbox.never_published(limit=10)) == 10
        outbox.mark_published("o-0")
        assert "o-0" not in [e.key for e in outbox.never_published()]
        assert next(e.key for e in outbox.due(3600)) == "o-1"
        with odb.write():
            for i in range(1100):
                receipts.finish(f"o-{i}", receipts.DONE, {"ok": True})
        left = prune_done(outbox, odb, erase=True)
        assert sorted(left) == sorted(f"o-{i}" for i in range(1100, 1200))
        assert sorted(outbox.keys()) == sorted(left)
    finally:
        outbox.close()

