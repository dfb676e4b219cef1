"""memory.log's appends (models/workspace/memlog.py): a missing folder is made, rotation keeps
its backups, and a log that cannot be written never raises."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from orchmem.models.workspace.memlog import MemoryLog, read_log


def test_a_missing_folder_is_made_again_at_the_next_line(tmp_path: Path) -> None:
    path = tmp_path / "a" / "logs" / "memory.log"
    log = MemoryLog(path, "orch", max_bytes=0, backups=0)
    log.write("first", n=1)
    shutil.rmtree(tmp_path / "a")  # an operator cleaned the folder away
    log.write("second", n=2)
    assert [(r["event"], r["n"], r["orchestratorId"]) for r in read_log(path)] == [
        ("second", 2, "orch")]


def test_rotation_keeps_the_backups(tmp_path: Path) -> None:
    path = tmp_path / "memory.log"
    log = MemoryLog(path, "orch", max_bytes=200, backups=2)
    for n in range(30):
        log.write("line", n=n)
    names = {p.name for p in tmp_path.iterdir()}
    assert {"memory.log.1", "memory.log.2"} <= names and "memory.log.3" not in names
    # Newest last: the current file (if a line came after the last rotation), then .1.
    newest = read_log(path) or read_log(tmp_path / "memory.log.1")
    assert newest[-1]["n"] == 29


def test_an_unwritable_log_is_reported_not_raised(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    log = MemoryLog(blocker / "memory.log", "orch", max_bytes=0, backups=0)
    with caplog.at_level(logging.WARNING, logger="orchmem.models.workspace.memlog"):
        log.write("lost", n=1)
    assert "cannot write" in caplog.text and '"lost"' in caplog.text
