"""Reads never create an orchestrator: a name nobody wrote to (a typo) leaves nothing
on disk, through a real worker (the bulletin) and in this process (recall, get,
context_for); the first write creates it, or ``create=True``."""

from __future__ import annotations

from pathlib import Path

from orchmem_testing import WorkerProcess, unique_id

from orchmem.config import Settings
from orchmem.worker import MemoryClient

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def _nothing_under(settings: Settings, orchestrator_id: str) -> list[Path]:
    folder = settings.runtime_root(orchestrator_id)
    return [folder, *folder.rglob("*")] if folder.exists() else []


def test_reads_of_an_unknown_orchestrator_create_nothing_and_a_write_creates_it(
        settings: Settings, worker: WorkerProcess) -> None:
    orch = unique_id("never-seen-bot")
    client = MemoryClient(orch, settings)
    bundle = client.recall("what does the user prefer?")
    assert bundle.nodes == []
    assert client.bulletin(timeout=30).bulletin.get("items", []) == []
    assert client.context_for("step", "what does the user prefer?") is not None
    assert client.get([]) == []
    assert client.wait_for_writes(timeout=0) == []
    assert MemoryClient(orch, settings, remote=True).recall("anything").nodes == []
    assert _nothing_under(settings, orch) == []
    done = client.write_back(memories=[{"type": "Fact", "source": MANUAL,
                                        "content": "The user prefers short answers"}]
                             ).wait(60)
    assert done and done["ok"], done
    assert (settings.runtime_root(orch) / "memory" / "memory.db").is_file()
    assert client.recall("what does the user prefer?").nodes


def test_create_true_creates_the_orchestrator_at_once(settings: Settings) -> None:
    orch = unique_id("made-on-purpose")
    MemoryClient(orch, settings, create=True)
    assert (settings.runtime_root(orch) / "memory" / "memory.db").is_file()
    assert MemoryClient(orch, settings).recall("anything").nodes == []
