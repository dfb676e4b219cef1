"""A write the worker would refuse is refused by the client at once, with field paths.

Before, ``write_back`` returned ``ok=True`` for a memory without a ``source`` and only
``wait()`` showed the worker's rejection, under the exception's class name: a caller
that did not wait lost the write silently. These run the real client in immediate
mode (the task code in this process, on a real SQLite file; no broker).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings, unique_id

from orchmem.config import MemoryValidationError, Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.worker import MemoryClient
from orchmem.worker.client.handles import task_result


@pytest.fixture
def client(tmp_path: Path, embedder: Embedder) -> MemoryClient:
    settings: Settings = make_settings(tmp_path / "root", "redis://127.0.0.1:1/0")
    return MemoryClient(unique_id("checks"), settings, immediate=True)


def test_an_invalid_memory_is_refused_at_once_with_its_field_path_and_not_published(
        client: MemoryClient) -> None:
    handle = client.write_back(memories=[{"type": "Factoid", "content": "x"},
                                         {"type": "Fact", "content": ""}])
    assert handle.ok is False and handle.error == "validation"
    paths = {e["path"] for e in handle.errors}
    assert {"memories.0.type", "memories.1.content"} <= paths
    assert "memories.0.type" in (handle.message or "")
    assert handle.task_id is None and handle.outboxed is False
    assert client.outbox.never_published(limit=10) == []
    assert client.recall("x").nodes == []


def test_a_memory_without_a_source_is_written_as_manual_by_the_user(
        client: MemoryClient) -> None:
    handle = client.write_back(memories=[{"type": "Fact", "content": "The office is in Porto"}])
    assert handle.ok, handle
    result = handle.wait(30)
    assert result is not None and result["ok"], result
    [node] = client.get(result["memoryIds"])
    assert node.source.source_type.value == "manual"
    assert node.source.captured_by.value == "user"


def test_too_many_memories_in_one_write_are_refused_before_publishing(
        client: MemoryClient) -> None:
    limit = client.memory.writeback.max_memories_per_task
    many = [{"type": "Fact", "content": f"fact {i}"} for i in range(limit + 1)]
    handle = client.write_back(memories=many)
    assert handle.ok is False and handle.error == "validation"
    assert handle.errors == [{"path": "memories", "message": f"at most {limit}"}]


@pytest.mark.parametrize(("call", "path"), [
    (lambda c: c.link("m-00000000-0000000000000001", "m-00000000-0000000000000002",
                      "Likes"), "link.edgeType"),
    (lambda c: c.link("m-00000000-0000000000000001", "m-00000000-0000000000000002",
                      "RelatedTo", weight=3.0), "link.weight"),
    (lambda c: c.retract("m-00000000-0000000000000001", ""), "retract.reason"),
], ids=["edge-type", "weight", "empty-reason"])
def test_an_invalid_edit_is_refused_at_once(client: MemoryClient, call: Any, path: str) -> None:
    handle = call(client)
    assert handle.ok is False and handle.error == "validation"
    assert path in [e["path"] for e in handle.errors], handle.errors


def test_a_task_the_worker_refuses_reports_the_stable_code_not_a_class_name(
        client: MemoryClient) -> None:
    written = client.write_back(memories=[{"type": "Fact", "content": "The venue is Lyon"}])
    result = written.wait(30)
    assert result is not None
    [memory_id] = result["memoryIds"]
    # Valid as a request; only the worker knows "neither by nor content" is an error.
    refused = client.supersede(memory_id).wait(30)
    assert refused is not None and refused["ok"] is False, refused
    assert refused["error"] == "validation" and isinstance(refused["errors"], list)
    assert "Error" not in refused["error"]


def test_task_results_are_flat_whatever_their_origin() -> None:
    exc = MemoryValidationError("invalid: memories.0.type", [{"path": "memories.0.type",
                                                              "message": "bad"}])
    assert task_result(exc) == {"ok": False, "error": "validation",
                                "message": "invalid: memories.0.type",
                                "errors": [{"path": "memories.0.type", "message": "bad"}]}
    stored = {"ok": False, "task": "orchmem.writeback",
              "error": {"error": "dead_letter", "message": "delivered 4 times"}}
    assert task_result(stored) == {"ok": False, "task": "orchmem.writeback",
                                   "error": "dead_letter", "message": "delivered 4 times",
                                   "errors": []}
    assert task_result(RuntimeError("boom"))["error"] == "internal"
    assert task_result({"ok": True, "memoryIds": []}) == {"ok": True, "memoryIds": []}
