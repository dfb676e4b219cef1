"""Read-your-writes during a worker outage: bounded, one query a poll, never raising.

A real Redis with no worker: writes are published and never applied.
"""

from __future__ import annotations

from typing import Any

import pytest

from orchmem.config import StorageError
from orchmem.models.storage.delivery import receipts
from orchmem.worker.client.memory_client import MemoryClient

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def _client(isolated: Any, orchestrator_id: str) -> MemoryClient:
    settings = isolated(memory={"retrieval": {"read_your_writes_timeout_s": 0.5}})
    seed = MemoryClient(orchestrator_id, settings, immediate=True)
    assert seed.write_back(memories=[{"type": "Fact", "source": MANUAL,
                                      "content": "The staging host is called tern"}]).ok
    return MemoryClient(orchestrator_id, settings)


def _count_receipt_queries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = receipts.final_keys

    def counting(odb: Any, keys: Any) -> set[str]:
        calls.append(len(keys))
        return real(odb, keys)

    monkeypatch.setattr(receipts, "final_keys", counting)
    return calls


def test_a_write_nobody_applies_is_waited_for_once_not_by_every_recall(
        isolated: Any, orch_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client(isolated, orch_id)
    handles = [client.write_back(memories=[{"type": "Fact", "source": MANUAL,
                                            "content": f"Queue {i} is paused"}])
               for i in range(20)]
    assert all(h.ok for h in handles)
    calls = _count_receipt_queries(monkeypatch)

    first = client.recall("staging host")
    assert any("20 of this client's write-backs" in w for w in first.warnings), first.warnings
    assert calls[0] == 20  # one query for all pending keys, not one per key

    calls.clear()
    second = client.recall("staging host")
    assert second.warnings == []
    assert calls == []  # given up on: no poll at all
    assert second.nodes[0].memory.content == "The staging host is called tern"


def test_recall_degrades_when_receipts_cannot_be_read(
        isolated: Any, orch_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client(isolated, orch_id)
    assert client.write_back(memories=[{"type": "Fact", "source": MANUAL,
                                        "content": "The backup window is 02:00"}]).ok

    def broken(odb: Any, keys: Any) -> set[str]:
        raise StorageError("disk I/O error")

    monkeypatch.setattr(receipts, "final_keys", broken)
    bundle = client.recall("staging host")  # must not raise
    assert bundle.nodes[0].memory.content == "The staging host is called tern"
    assert any("write-backs are not" in w for w in bundle.warnings)
