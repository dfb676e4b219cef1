"""The re-embed task: memories stored without vectors get them, in batches, on a real worker."""

from __future__ import annotations

from typing import Any, cast

import pytest

from orchmem.config import Settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.embedding.reembed import reembed_batch, remaining
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases
from orchmem.models.telemetry import meters, names
from orchmem.models.workspace.memlog import read_log
from orchmem.models.writeback.apply import write_memories
from orchmem.tasks.maintenance import REEMBED
from orchmem.worker.runtime.app import OrchmemCelery
from orchmem.worker.runtime.publish import publish

pytestmark = pytest.mark.usefixtures("worker")


def test_reembed_fills_missing_vectors_in_batches_and_recall_uses_them(
        app: OrchmemCelery, settings: Settings, embedder: Embedder, orch_id: str) -> None:
    databases = Databases(settings)
    odb = databases.open(orch_id)
    memories = [validate(MemoryInput, {"type": "Fact", "content": f"fact {i} about gardening",
                                       "source": {"sourceType": "manual", "capturedBy": "user"}})
                for i in range(25)]
    write_memories(odb, key="no-vectors", task="t", memories=memories)
    assert remaining(odb, embedder.version) == 25
    assert recall(orch_id, "gardening", databases=databases).vector_available is False

    _, result = publish(app, REEMBED, orch_id, "reembed",
                        {"idempotencyKey": "reembed-test", "batchSize": 10})
    value = result.get(timeout=120)
    assert value["embedded"] == 25 and value["remaining"] == 0 and value["batches"] == 3
    assert remaining(odb, embedder.version) == 0
    bundle = recall(orch_id, "growing plants", databases=databases)
    assert bundle.vector_available and bundle.candidates["vector"] == 25
    progress = [r for r in read_log(odb.workspace.log_path) if r["event"] == "reembed_progress"]
    assert [r["remaining"] for r in progress] == [15, 5, 0]


def test_reembed_rejects_bad_parameters(app: OrchmemCelery, orch_id: str) -> None:
    _, result = publish(app, REEMBED, orch_id, "reembed",
                        {"idempotencyKey": "bad-batch", "batchSize": -3})
    result.get(timeout=60, propagate=False)
    assert result.failed()


class _Counted:
    """A metrics sink (models/telemetry/meters.py) keeping re-embedding's recordings."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, float]] = []

    def record(self, name: str, kind: str, value: float, attributes: dict[str, str]) -> None:
        if name == names.M_REEMBEDDED:
            self.seen.append((attributes[names.OUTCOME], value))


class _Down:
    """An embedder whose model fails (a device lost, an out-of-memory)."""

    def __init__(self, version: str) -> None:
        self.version = version

    def encode(self, texts: list[str]) -> Any:
        raise RuntimeError("model unavailable")


def test_a_failed_batch_is_counted_failed_stores_nothing_and_the_next_one_embeds(
        settings: Settings, embedder: Embedder, orch_id: str) -> None:
    odb = Databases(settings).open(orch_id)
    assert odb is not None
    write_memories(odb, key="counted", task="t", memories=[
        validate(MemoryInput, {"type": "Fact", "content": f"fact {i} about beekeeping",
                               "source": {"sourceType": "manual", "capturedBy": "user"}})
        for i in range(3)])
    stale = remaining(odb, embedder.version)
    counted = _Counted()
    meters.install_sink(counted)
    try:
        with pytest.raises(RuntimeError, match="model unavailable"):
            reembed_batch(odb, cast(Embedder, _Down(embedder.version)), batch_size=50)
        assert remaining(odb, embedder.version) == stale  # nothing half-stored
        assert reembed_batch(odb, embedder, batch_size=50) == stale
    finally:
        meters.install_sink(None)
    assert counted.seen == [("failed", stale), ("embedded", stale)]
