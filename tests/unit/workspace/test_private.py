"""The private-mode helpers (models/workspace/private.py): what they create is 0700 / 0600 under
a permissive umask, SQLite's companions take the database's mode, and the scan finds
and narrows what is wider."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchmem.models.workspace.private import (
    make_private,
    narrow,
    open_private,
    private_database,
    private_dir,
    wide_entries,
    write_private,
)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """Umask 022, the usual default: without explicit modes files come out 0644."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_private_dir_makes_every_missing_folder_0700_and_leaves_existing_ones(
        tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    made = private_dir(existing / "a" / "b" / "c")
    assert made.is_dir()
    assert [mode(existing / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3
    assert mode(existing) == 0o755  # not made here: `orchmem check` reports it
    assert private_dir(made) == made  # idempotent


def test_private_dir_refuses_a_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        private_dir(tmp_path / "file")


def test_files_are_created_0600_and_existing_ones_keep_their_mode(tmp_path: Path) -> None:
    write_private(tmp_path / "new.json", "{}")
    with open_private(tmp_path / "appended.log", "ab") as fh:
        fh.write(b"line\n")
    assert mode(tmp_path / "new.json") == mode(tmp_path / "appended.log") == 0o600
    old = tmp_path / "old.txt"
    old.write_text("before")
    assert mode(old) == 0o644
    write_private(old, "after")
    assert old.read_text() == "after" and mode(old) == 0o644


def test_sqlite_gives_wal_and_shm_the_mode_of_a_private_database(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    private_database(path)
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.commit()
        names = sorted(p.name for p in tmp_path.iterdir())
        assert names == ["memory.db", "memory.db-shm", "memory.db-wal"]
        assert {p.name: mode(p) for p in tmp_path.iterdir()} == dict.fromkeys(names, 0o600)
    finally:
        conn.close()


def test_sqlite_gives_the_journal_the_mode_of_a_private_database(tmp_path: Path) -> None:
    path = tmp_path / "backup.db"
    private_database(path)
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (1)")
        journal = tmp_path / "backup.db-journal"
        assert journal.exists() and mode(journal) == 0o600
        conn.execute("COMMIT")
    finally:
        conn.close()
    assert mode(path) == 0o600


def test_the_scan_finds_wide_entries_skips_links_and_make_private_narrows_them(
        tmp_path: Path) -> None:
    root = private_dir(tmp_path / "root")
    wide_folder = root / "open"
    wide_folder.mkdir(mode=0o755)
    shared = wide_folder / "shared.db"
    shared.write_text("x")
    write_private(root / "fine.json", "{}")
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    (root / "link").symlink_to(outside)
    found = {e.path.relative_to(root).as_posix(): (e.mode, e.is_dir) for e in wide_entries(root)}
    assert found == {"open": (0o755, True), "open/shared.db": (0o644, False)}
    for entry in wide_entries(root):
        make_private(entry)
    assert list(wide_entries(root)) == []
    assert (mode(wide_folder), mode(shared), mode(outside)) == (0o700, 0o600, 0o644)


def test_narrow_takes_group_and_other_bits_off_a_taken_in_file(tmp_path: Path) -> None:
    dropped = tmp_path / "notes.md"
    dropped.write_text("dropped by a user")
    dropped.chmod(0o664)
    narrow(dropped)
    assert mode(dropped) == 0o600


def test_the_cli_sets_the_same_process_umask() -> None:
    from orchmem.models.workspace.private import PROCESS_UMASK
    from orchmem.worker.cli.main import PROCESS_UMASK as CLI_UMASK

    assert CLI_UMASK == PROCESS_UMASK
