"""``MemoryClient(..., immediate=True)``: the real task code, in this process, no broker.

The broker URL of these settings points at a port nobody listens on, and a guard
refuses every socket connection while the client works: whatever passes here needed
no Redis and no worker. The guard records the attempts; the tests assert none went to
the client's broker (a result handle of an earlier test, collected meanwhile, may try
to reach its own, long-stopped Redis from a background thread: not this client).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import free_port, make_settings, unique_id

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.worker import MemoryClient


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    attempts: list[str] = []

    def refuse(self: socket.socket, address: Any, *args: Any) -> None:
        attempts.append(repr(address))
        raise OSError(f"no network in immediate mode: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    yield attempts


BROKER_PORT = free_port()


@pytest.fixture
def offline_settings(tmp_path: Path, embedder: Embedder) -> Settings:
    # ``embedder``: the model is loaded once per session before the network is cut.
    return make_settings(tmp_path / "root", f"redis://127.0.0.1:{BROKER_PORT}/0")


def to_broker(attempts: list[str]) -> list[str]:
    return [a for a in attempts if f", {BROKER_PORT})" in a]


def _memory(content: str, memory_type: str = "Preference") -> dict[str, Any]:
    return {"type": memory_type, "content": content, "importance": 60,
            "source": {"sourceType": "manual", "capturedBy": "user"}}


def test_immediate_client_writes_recalls_edits_and_builds_a_bulletin_with_no_broker(
        offline_settings: Settings, no_network: list[str]) -> None:
    client = MemoryClient(unique_id("immediate"), offline_settings, immediate=True)
    handle = client.write_back(memories=[_memory("The user prefers green tea in the morning"),
                                         _memory("Ship the billing migration by Friday",
                                                 "Goal")])
    assert handle.ok and handle.done()
    result = handle.wait()
    assert result is not None and result["ok"] and len(result["memoryIds"]) == 2
    tea, goal = result["memoryIds"]

    bundle = client.recall("what tea does the user like?")
    assert bundle.memory_ids[0] == tea
    assert bundle.warnings == []

    retract = client.retract(goal, "the migration was cancelled")
    assert retract.ok and retract.wait()["ok"]
    assert [m.status.value for m in client.get([goal])] == ["retracted"]

    bulletin = client.bulletin()
    assert bulletin.source == "live"
    assert tea in bulletin.text and goal not in bulletin.text
    assert to_broker(no_network) == []


def test_immediate_client_refuses_a_bad_write_at_once(
        offline_settings: Settings, no_network: list[str]) -> None:
    client = MemoryClient(unique_id("immediate-bad"), offline_settings, immediate=True)
    handle = client.write_back(memories=[{"type": "Fact"}])
    assert handle.ok is False and handle.error == "validation"
    assert handle.errors == [{"path": "memories.0.content", "message": "Field required"}]
    assert handle.wait() is None
    assert client.recall("anything").nodes == []
    assert to_broker(no_network) == []


def test_the_same_idempotency_key_writes_once_in_immediate_mode(
        offline_settings: Settings) -> None:
    client = MemoryClient(unique_id("immediate-key"), offline_settings, immediate=True)
    first = client.write_back(memories=[_memory("The user's name is Ada", "Identity")],
                              idempotency_key="wb-once")
    second = client.write_back(memories=[_memory("The user's name is Ada", "Identity")],
                               idempotency_key="wb-once")
    assert first.task_id == second.task_id == f"{client.orchestrator_id}/wb-once"
    assert first.wait()["memoryIds"] == second.wait()["memoryIds"]
    assert second.wait().get("duplicate") is True
