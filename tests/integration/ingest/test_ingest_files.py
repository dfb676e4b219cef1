"""The ingest scan in-process, against the file system's races and limits: a file swapped
between its checks and its read, names that collide or run long, a file still too new,
processed/ linked out of the workspace."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from orchmem_testing import make_settings

from orchmem.config import ScopeViolation
from orchmem.models.ingest import files as ingest_files_module
from orchmem.models.ingest import scan as ingest_module
from orchmem.models.ingest.scan import scan
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.writeback.reconcile import Proposed

Embed = Callable[[list[Proposed]], tuple[list[Proposed], str | None]]


def open_odb(root: Path, min_file_age_s: float = 0) -> OrchestratorDB:
    settings = make_settings(root, "", memory={"ingest": {"min_file_age_s": min_file_age_s}})
    handle = Databases(settings).open("files")
    assert handle is not None
    return handle


@pytest.fixture
def odb(tmp_path: Path) -> OrchestratorDB:
    return open_odb(tmp_path / "root")



def scan_within(odb: OrchestratorDB, embed: Embed, seconds: float = 20) -> dict[str, Any]:
    """The scan's result; fails (instead of hanging the test) if it blocks."""
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(scan(odb, embed, "test")), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the scan blocked for more than {seconds}s"
    return out


class OsSwapping(ModuleType):
    """The ``os`` module as the module reading ingest files sees it, with ``swap(path)``
    run just before a file is opened: the window between the checks and the open."""

    def __init__(self, swap: Callable[[Path], None]) -> None:
        super().__init__("os")
        self.swap = swap

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def open(self, path: Any, flags: int, *args: Any) -> int:
        self.swap(Path(path))
        return os.open(path, flags, *args)


def to_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def to_symlink(target: Path) -> Callable[[Path], None]:
    def swap(path: Path) -> None:
        path.unlink()
        path.symlink_to(target)

    return swap


def to_other_file(path: Path) -> None:
    fresh = path.with_name(".fresh.tmp")
    fresh.write_text("I prefer oolong tea.")
    os.replace(fresh, path)


def grow(path: Path) -> None:
    with path.open("a") as fh:
        fh.write(" And rooibos in the evening.")


def test_a_file_swapped_for_a_fifo_after_its_checks_is_rejected_without_blocking(
        odb: OrchestratorDB, embed: Embed, monkeypatch: pytest.MonkeyPatch) -> None:
    path = odb.workspace.ingest_dir / "notes.md"
    path.write_text("I prefer green tea.")
    monkeypatch.setattr(ingest_files_module, "os", OsSwapping(to_fifo))
    [outcome] = scan_within(odb, embed)["files"]
    assert (outcome["outcome"], outcome["reason"]) == ("rejected", "not_regular_file")
    rejected = odb.workspace.rejected_dir
    assert json.loads((rejected / "notes.md.reason.json").read_text())["reason"] == \
        "not_regular_file"
    assert (rejected / "notes.md").is_fifo()
    assert list_memories(odb) == []


def test_a_file_swapped_for_a_symlink_after_its_checks_is_rejected_unread(
        odb: OrchestratorDB, embed: Embed, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    target = tmp_path / "secret.md"
    target.write_text("My name is Mallory.")
    (odb.workspace.ingest_dir / "notes.md").write_text("I prefer green tea.")
    monkeypatch.setattr(ingest_files_module, "os", OsSwapping(to_symlink(target)))
    [outcome] = scan_within(odb, embed)["files"]
    assert (outcome["outcome"], outcome["reason"]) == ("rejected", "symlink")
    assert (odb.workspace.rejected_dir / "notes.md").is_symlink()
    assert target.read_text() == "My name is Mallory."
    assert list_memories(odb) == []


@pytest.mark.parametrize("swap", [to_other_file, grow, Path.unlink],
                         ids=["replaced", "growing", "removed"])
def test_a_file_that_changes_while_being_read_is_left_for_the_next_scan(
        odb: OrchestratorDB, embed: Embed, monkeypatch: pytest.MonkeyPatch,
        swap: Callable[[Path], None]) -> None:
    path = odb.workspace.ingest_dir / "notes.md"
    path.write_text("I prefer green tea.")
    monkeypatch.setattr(ingest_files_module, "os", OsSwapping(swap))
    result = scan_within(odb, embed)
    assert (result["skipped"], result["rejected"], result["ingested"]) == (1, 0, 0)
    assert result["files"][0]["reason"] == "changed"
    assert list(odb.workspace.rejected_dir.iterdir()) == []
    monkeypatch.undo()
    again = scan_within(odb, embed)
    if swap is Path.unlink:
        assert again["files"] == []
        return
    assert again["ingested"] == 1
    assert os.listdir(odb.workspace.processed_dir) == ["notes.md"]
    assert list_memories(odb)


def test_a_file_younger_than_min_file_age_is_skipped_then_ingested_once_old_enough(
        tmp_path: Path, embed: Embed) -> None:
    odb = open_odb(tmp_path / "root", min_file_age_s=30)
    path = odb.workspace.ingest_dir / "notes.md"
    path.write_text("I prefer green tea.")
    first = scan(odb, embed, "test")
    assert (first["skipped"], first["ingested"], first["rejected"]) == (1, 0, 0)
    assert first["files"] == [{"file": "notes.md", "outcome": "skipped", "reason": "too_new",
                               "detail": "modified less than 30.0s ago"}]
    assert path.exists() and list_memories(odb) == []
    old = time.time() - 60
    os.utime(path, (old, old))
    second = scan(odb, embed, "test")
    assert (second["skipped"], second["ingested"]) == (0, 1)
    assert not path.exists() and os.listdir(odb.workspace.processed_dir) == ["notes.md"]
    assert [n.content for n in list_memories(odb)] == ["I prefer green tea."]


def test_the_same_content_dropped_three_times_keeps_three_processed_files(
        odb: OrchestratorDB, embed: Embed) -> None:
    for _ in range(3):
        (odb.workspace.ingest_dir / "a.md").write_text("I prefer green tea.")
        result = scan(odb, embed, "test")
    sha = result["files"][0]["sha256"]
    assert sorted(os.listdir(odb.workspace.processed_dir)) == sorted(
        ["a.md", f"a.{sha[:12]}.md", f"a.{sha[:12]}.2.md"])
    assert len(list_memories(odb)) == 1


def test_a_name_too_long_for_its_reason_file_is_shortened_not_lost(
        odb: OrchestratorDB, embed: Embed) -> None:
    name = "ü" * 100 + "x" * 46 + ".pdf"  # 250 bytes: the name fits, name.reason.json not
    bodies = [b"first", b"second"]
    for body in bodies:
        (odb.workspace.ingest_dir / name).write_bytes(body)
        result = scan(odb, embed, "test")
        assert result["files"][0]["reason"] == "unsupported_extension"
    kept = sorted(p for p in odb.workspace.rejected_dir.iterdir()
                  if not p.name.endswith(".reason.json"))
    assert sorted(p.read_bytes() for p in kept) == sorted(bodies)
    for path in kept:
        assert path.name.endswith(".pdf") and path.name.startswith("üü")
        assert len(os.fsencode(path.name + ".reason.json")) <= 255
        assert json.loads(path.with_name(path.name + ".reason.json").read_text())["file"] == name


def test_a_processed_folder_linked_out_of_the_workspace_refuses_the_scan(
        odb: OrchestratorDB, embed: Embed, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    odb.workspace.processed_dir.rmdir()
    odb.workspace.processed_dir.symlink_to(outside)
    (odb.workspace.ingest_dir / "notes.md").write_text("I prefer green tea.")
    with pytest.raises(ScopeViolation, match=r"^outside_workspace: "):
        scan(odb, embed, "test")
    assert list(outside.iterdir()) == []
    assert (odb.workspace.ingest_dir / "notes.md").exists()
    assert list_memories(odb) == []


def test_a_file_renamed_in_between_the_commit_and_the_move_is_not_moved_unread(
        odb: OrchestratorDB, embed: Embed, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = odb.workspace.ingest_dir
    (ingest / "notes.md").write_text("I prefer green tea.")
    real = ingest_module.move_to_processed

    def newer_file_dropped_first(*args: Any, **kwargs: Any) -> Path:
        # README's way to drop a file: write it aside, then rename it into ingest/.
        fresh = ingest / ".notes.md.tmp"
        fresh.write_text("I prefer oolong tea.")
        os.replace(fresh, ingest / "notes.md")
        return real(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "move_to_processed", newer_file_dropped_first)
    first = scan(odb, embed, "test")
    assert [(f["file"], f["outcome"]) for f in first["files"]] == [("notes.md", "ingested")]
    assert [p.read_text() for p in odb.workspace.processed_dir.iterdir()] == [
        "I prefer green tea."]
    assert (ingest / "notes.md").read_text() == "I prefer oolong tea."
    monkeypatch.undo()
    second = scan(odb, embed, "test")
    assert [(f["file"], f["outcome"]) for f in second["files"]] == [("notes.md", "ingested")]
    assert sorted(p.read_text() for p in odb.workspace.processed_dir.iterdir()) == [
        "I prefer green tea.", "I prefer oolong tea."]
    assert not (ingest / "notes.md").exists()
    assert sorted(n.content for n in list_memories(odb)) == [
        "I prefer green tea.", "I prefer oolong tea."]


def test_a_changed_file_whose_name_a_newer_file_took_is_kept_for_the_next_scan(
        odb: OrchestratorDB, embed: Embed, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = odb.workspace.ingest_dir
    (ingest / "notes.md").write_text("I prefer green tea.")

    def grow_and_drop_a_newer_one(path: Path) -> None:
        grow(path)
        (ingest / "notes.md").write_text("I prefer oolong tea.")

    monkeypatch.setattr(ingest_files_module, "os", OsSwapping(grow_and_drop_a_newer_one))
    first = scan_within(odb, embed)
    assert [(f["file"], f["outcome"], f["reason"]) for f in first["files"]] == [
        ("notes.md", "skipped", "changed")]
    assert (ingest / "notes.md").read_text() == "I prefer oolong tea."  # not replaced
    monkeypatch.undo()
    second = scan_within(odb, embed)
    assert [(f["file"], f["outcome"]) for f in second["files"]] == [
        ("notes.md", "ingested"), ("notes.md", "ingested")]
    assert sorted(p.read_text() for p in odb.workspace.processed_dir.iterdir()) == [
        "I prefer green tea. And rooibos in the evening.", "I prefer oolong tea."]
    assert [p for p in ingest.rglob("*") if p.is_file() and "processed" not in p.parts] == []
