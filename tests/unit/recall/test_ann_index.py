"""The approximate index file (models/storage/search/ann.py): built from the stored
vectors, searched with exact re-scoring (exact search's order and cosines; its hits
but for a near tie the graph may miss), brought up to
date by the writer, never trusted when missing, truncated, of another embedder or
behind the database, and off below the threshold."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from orchmem_testing import free_port, make_settings

from orchmem.config import ConfigError
from orchmem.models.core.shapes import MemoryInput, derive_id, validate
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.memories import events
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.search import ann, vectors

ORCH = "ann"
EMBEDDER = "toy-1"
DIM = 32
MANUAL = {"sourceType": "manual", "capturedBy": "user"}


@pytest.fixture
def odb(tmp_path: Path) -> Iterator[OrchestratorDB]:
    settings = make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0",
                             memory={"retrieval": {"ann_threshold": 100}})
    databases = Databases(settings)
    opened = databases.open(ORCH)
    assert opened is not None
    yield opened
    databases.close_all()


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def _add(odb: OrchestratorDB, first: int, matrix: np.ndarray,
         embedder: str = EMBEDDER) -> list[str]:
    ids = [derive_id("m", ORCH, "k", first + i) for i in range(len(matrix))]
    with odb.write():
        for i, memory_id in enumerate(ids):
            memory = validate(MemoryInput, {"type": "Fact", "content": f"note {first + i}",
                                            "source": MANUAL}, workspace=odb.workspace)
            memories.insert_memory(memory_id, memory, key=f"k-{first + i}")
            events.add_event("create", [memory_id], key=f"k-{first + i}")
        vectors.store_embeddings(zip(ids, matrix, strict=True), embedder)
    return ids


def _exact(odb: OrchestratorDB, query: np.ndarray, limit: int,
           keep: vectors.Callable[[list[str]], set[str]] | None = None) -> list[vectors.VectorHit]:
    with odb.read():
        index = vectors.index_for(odb, EMBEDDER, DIM)
        return vectors.search(odb, query, embedder=EMBEDDER, limit=limit, keep=keep,
                              index=index)[0]


def _approximate(odb: OrchestratorDB, query: np.ndarray, limit: int,
                 keep: vectors.Callable[[list[str]], set[str]] | None = None
                 ) -> list[vectors.VectorHit]:
    with odb.read():
        index = vectors.searchable(odb, EMBEDDER, DIM)
        assert vectors.approximate(index)
        return vectors.search(odb, query, embedder=EMBEDDER, limit=limit, keep=keep,
                              index=index)[0]


def _exactly_scored(found: list[vectors.VectorHit], ids: list[str], matrix: np.ndarray,
                    query: np.ndarray) -> None:
    """Every hit carries its stored vector's exact cosine, and they are in exact
    search's order (cosine, then memoryId)."""
    cosines = dict(zip(ids, (matrix.astype(np.float64) @ query).tolist(), strict=True))
    assert np.allclose([h.cosine for h in found], [cosines[h.memory_id] for h in found],
                       rtol=0, atol=1e-6)
    assert found == sorted(found, key=lambda h: (-h.cosine, h.memory_id))


def _built(odb: OrchestratorDB, n: int = 400, seed: int = 1) -> tuple[list[str], np.ndarray]:
    matrix = _unit(np.random.default_rng(seed).standard_normal((n, DIM)))
    ids = _add(odb, 0, matrix)
    assert ann.sync(odb, EMBEDDER, DIM) == "built"
    return ids, matrix


def test_the_file_answers_in_exact_order_and_agrees_with_exact_search(
        odb: OrchestratorDB) -> None:
    ids, matrix = _built(odb)
    path, header_path = ann.paths(odb.workspace)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(header_path.stat().st_mode) == 0o600
    header = json.loads(header_path.read_text())
    assert (header["embedder"], header["dim"], header["count"]) == (EMBEDDER, DIM, 400)
    odd = set(ids[1::2])
    queries = _unit(np.random.default_rng(2).standard_normal((20, DIM)))
    agreed = asked = 0
    for query in queries:
        for keep in (None, lambda found: {m for m in found if m in odd}):
            found = _approximate(odb, query, 10, keep)
            _exactly_scored(found, ids, matrix, query)
            assert len(found) == 10 and (keep is None or {h.memory_id for h in found} <= odd)
            exact = {h.memory_id for h in _exact(odb, query, 10, keep)}
            agreed += len(exact & {h.memory_id for h in found})
            asked += len(exact)
    # approximate: a near tie may be missed (random 32-dimension vectors are the hard case)
    assert agreed / asked >= 0.95


def test_vectors_written_after_the_file_are_found_and_then_written_to_it(
        odb: OrchestratorDB) -> None:
    _built(odb)
    query = _unit(np.random.default_rng(3).standard_normal(DIM))
    [near] = _add(odb, 1000, query[None, :])
    assert _approximate(odb, query, 5)[0].memory_id == near
    assert ann.sync(odb, EMBEDDER, DIM) == "current"  # fewer than FLUSH_EVERY since
    assert ann.sync(odb, EMBEDDER, DIM, force=True) == "updated"
    assert ann.read_header(odb.workspace).count == 401
    assert _approximate(odb, query, 5)[0].memory_id == near


def test_a_replaced_vector_is_searched_as_stored(odb: OrchestratorDB) -> None:
    ids, matrix = _built(odb)
    moved = _unit(np.random.default_rng(9).standard_normal(DIM))
    with odb.write():
        vectors.store_embeddings([(ids[3], moved)], EMBEDDER)
    for written in (False, True):  # scored from the lag, then from the rewritten file
        if written:
            assert ann.sync(odb, EMBEDDER, DIM, force=True) == "updated"
            assert ann.read_header(odb.workspace).count == 400
        assert _approximate(odb, moved, 1)[0].memory_id == ids[3]
        assert ids[3] not in {h.memory_id for h in _approximate(odb, matrix[3], 3)}


def _stored_forms(vector: np.ndarray) -> list[bytes]:
    """The vector's bytes as the file may hold them (bfloat16: float32's upper half,
    truncated or rounded)."""
    bits = vector.astype(np.float32).view(np.uint32)
    return [(bits >> 16).astype(np.uint16).tobytes(),
            ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes()]


def test_a_deleted_vector_is_not_returned_and_leaves_the_file(odb: OrchestratorDB) -> None:
    ids, matrix = _built(odb)
    gone = ids[7]
    path, _ = ann.paths(odb.workspace)
    assert any(form in path.read_bytes() for form in _stored_forms(matrix[7]))
    with odb.write():
        vectors.delete_embedding(gone)
    assert gone not in {h.memory_id for h in _approximate(odb, matrix[7], 10)}
    assert ann.sync(odb, EMBEDDER, DIM) == "updated"  # a delete is always written
    key = int(odb.sql("SELECT id FROM memories WHERE memory_id = ?", (gone,))[0][0])
    restored = ann.load(path)
    assert restored is not None and not restored.contains(key) and len(restored) == 399
    assert not any(form in path.read_bytes() for form in _stored_forms(matrix[7]))


def test_a_truncated_or_corrupt_file_is_not_used_check_names_it_and_sync_rebuilds(
        odb: OrchestratorDB) -> None:
    _, matrix = _built(odb)
    path, _ = ann.paths(odb.workspace)
    whole = path.read_bytes()
    path.write_bytes(whole[:len(whole) // 2])
    assert "truncated" in str(ann.verify(odb.workspace))
    with odb.read():
        assert not vectors.approximate(vectors.searchable(odb, EMBEDDER, DIM))
    assert ann.sync(odb, EMBEDDER, DIM) == "built"
    assert ann.verify(odb.workspace) is None
    flipped = bytearray(path.read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF
    path.write_bytes(bytes(flipped))
    assert "sha256" in str(ann.verify(odb.workspace))
    assert ann.sync(odb, EMBEDDER, DIM, force=False) in ("current", "built")
    ann.remove_files(odb.workspace)
    with odb.read():
        assert not vectors.approximate(vectors.searchable(odb, EMBEDDER, DIM))
        assert vectors.search(odb, matrix[0], embedder=EMBEDDER, limit=1)[0][0].cosine \
            == pytest.approx(1.0, abs=1e-6)


def test_a_file_of_another_embedder_is_not_used_and_is_rebuilt(odb: OrchestratorDB) -> None:
    _built(odb)
    with odb.read():
        assert vectors.approximate(vectors.searchable(odb, EMBEDDER, DIM))
        assert ann.reader(odb, "toy-2", DIM) is None
    assert ann.sync(odb, "toy-2", DIM) == "below"  # no vectors of toy-2: no file
    assert not ann.paths(odb.workspace)[0].exists()


def test_a_file_too_far_behind_the_database_is_not_used(odb: OrchestratorDB,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _built(odb)
    monkeypatch.setattr(ann, "MAX_LAG", 5)
    _add(odb, 1000, _unit(np.random.default_rng(4).standard_normal((6, DIM))))
    with odb.read():
        assert not vectors.approximate(vectors.searchable(odb, EMBEDDER, DIM))


def test_below_the_threshold_or_with_it_off_search_is_exact(odb: OrchestratorDB) -> None:
    matrix = _unit(np.random.default_rng(5).standard_normal((99, DIM)))
    _add(odb, 0, matrix)
    assert ann.sync(odb, EMBEDDER, DIM) == "below"
    assert not ann.paths(odb.workspace)[0].exists()
    _add(odb, 500, matrix[:1] * -1)
    assert ann.sync(odb, EMBEDDER, DIM) == "built"
    odb.memory = odb.memory.model_copy(update={"retrieval": odb.memory.retrieval.model_copy(
        update={"ann_threshold": 0})})
    with odb.read():
        assert not vectors.approximate(vectors.searchable(odb, EMBEDDER, DIM))
    assert ann.sync(odb, EMBEDDER, DIM) == "off"


def test_the_threshold_setting_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"memory\.retrieval\.ann_threshold"):
        make_settings(Path("/tmp/unused-root"), "redis://127.0.0.1:1/0",
                      memory={"retrieval": {"ann_threshold": -1}})
