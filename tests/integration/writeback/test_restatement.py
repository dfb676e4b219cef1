"""Saying a forgotten thing again, through the real worker: the same write-back after a
soft forget makes the memory active again (a ``restate`` event), while a redelivery
before any edit stays a duplicate; a new key with the same content restates it too."""

from __future__ import annotations

from typing import Any

from orchmem_testing import WorkerProcess

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.history import history
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.worker import MemoryClient


def _ops(client: MemoryClient, memory_id: str) -> list[str]:
    odb = client.databases.open(client.orchestrator_id, create=False)
    assert odb is not None
    return [e["op"] for e in history(odb, memory_id, EVERYTHING, purpose="test oracle")["events"]]


def _status(client: MemoryClient, memory_id: str) -> str:
    return client.get([memory_id], view=EVERYTHING, purpose="test oracle")[0].status.value


def test_the_same_write_back_after_a_forget_restates_the_memory(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    memory: dict[str, Any] = {"type": "Preference", "content": "The user likes green tea"}
    first = client.write_back(memories=[memory]).wait(60)
    memory_id = first["memoryIds"][0]
    again = client.write_back(memories=[memory]).wait(60)  # same key, nothing edited
    assert again["duplicate"] is True and again["memoryIds"] == [memory_id]
    assert client.forget(memory_id).wait(60)["ok"]
    assert _status(client, memory_id) == "retracted"

    said = client.write_back(memories=[memory]).wait(60)
    assert said["ok"] and said["duplicate"] is False, said
    assert said["memoryIds"] == [memory_id] and said["restated"] == [memory_id]
    assert _status(client, memory_id) == "active"
    assert _ops(client, memory_id)[-1] == "restate"
    # a redelivery of that message, before any edit, is a duplicate again
    assert client.write_back(memories=[memory]).wait(60)["duplicate"] is True
    assert _ops(client, memory_id).count("restate") == 1

    # another delivery of the same content (its own key) after a forget: active again
    assert client.forget(memory_id, reason="second time").wait(60)["ok"]
    other = client.write_back(memories=[memory], idempotency_key="restate-other-1").wait(60)
    assert other["memoryIds"] == [memory_id] and other["restated"] == [memory_id], other
    assert _status(client, memory_id) == "active"
    assert _ops(client, memory_id).count("restate") == 2


def test_a_hard_forgotten_memory_is_not_brought_back_by_its_old_write(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    memory: dict[str, Any] = {"type": "Fact", "content": "The spare key is under the mat"}
    memory_id = client.write_back(memories=[memory]).wait(60)["memoryIds"][0]
    assert client.forget(memory_id, hard=True).wait(60)["ok"]
    assert client.write_back(memories=[memory]).wait(60)["duplicate"] is True
    assert client.get([memory_id], view=EVERYTHING, purpose="test oracle") == []
