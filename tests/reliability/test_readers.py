"""Readers never create a database, and a quarantine is visible to every reader at once.

The client's registry opens files read-only: after a damaged memory.db is moved
aside, a reader thread that connects anew must not leave a fresh empty file behind
(which would later fail with "no such table: meta" instead of saying what happened).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from orchmem_testing import free_port, make_settings, unique_id

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.db.integrity import quarantine
from orchmem.worker import MemoryClient

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def _in_new_thread(call: Any) -> Any:
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(call()))
    thread.start()
    thread.join(60)
    return box[0]


def test_a_quarantine_is_seen_by_a_reader_that_cached_the_file_and_nothing_is_created(
        tmp_path: Path, embedder: Embedder) -> None:
    settings = make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0")
    orchestrator_id = unique_id("reader")
    writer = MemoryClient(orchestrator_id, settings, immediate=True)
    assert writer.write_back(memories=[{"type": "Fact", "source": MANUAL,
                                        "content": "The archive lives on host heron"}]).ok
    reader = MemoryClient(orchestrator_id, settings)
    assert reader.recall("archive host").nodes  # the reader caches its handle
    workspace = reader.databases.workspace(orchestrator_id)

    quarantine(workspace, "damaged pages (test)")
    bundle = _in_new_thread(lambda: reader.recall("archive host"))
    assert bundle.nodes == []
    assert any("disabled" in w for w in bundle.warnings), bundle.warnings
    assert not workspace.db_path.exists()

    workspace.disabled_marker.unlink()  # the operator clears the marker
    bundle = _in_new_thread(lambda: reader.recall("archive host"))
    assert bundle.nodes == [] and not any("no such table" in w for w in bundle.warnings)
    assert not workspace.db_path.exists()


def test_a_reader_registry_never_creates_a_database_or_a_folder(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0")
    databases = Databases(settings, readonly=True)
    assert databases.open("nobody-here", create=True) is None
    assert not (tmp_path / "root" / "orchestrators" / "nobody-here").exists()
