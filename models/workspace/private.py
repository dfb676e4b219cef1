"""orchmem's files are private to the user that runs it: folders 0700, files 0600.

Every tenant's task bodies (secrets included) live in these files, so no other local
user may read them. The modes are given where each folder and file is created, not
left to the process umask: the client runs inside an orchestrator's process, whose
umask is its host's to set. A mode passed at creation can only be narrowed by the
umask, never widened, so what these helpers create is at most 0700 / 0600 whatever the
umask is. Files that already exist keep their mode: ``orchmem check`` reports the ones
wider than private and ``orchmem check --fix`` narrows them (:func:`wide_entries`,
:func:`make_private`).

SQLite creates a database's ``-wal``, ``-shm`` and ``-journal`` files with the mode of
the database file itself, so a database created 0600 (:func:`private_database`) keeps
its companions 0600 too.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from orchmem.config import Settings

#: The mode of every folder orchmem makes.
DIR_MODE = 0o700
#: The mode of every file orchmem makes.
FILE_MODE = 0o600
#: The umask of the processes that own a root (``orchmem`` commands, workers, broker).
PROCESS_UMASK = 0o077
#: Group and other bits: any of them makes an entry wider than private.
_SHARED_BITS = 0o077


def private_dir(path: Path) -> Path:
    """Create ``path`` and its missing parents with mode 0700 (``mkdir -p``).

    Folders that already exist are left as they are. Raises FileExistsError when
    ``path`` exists and is not a folder, like ``Path.mkdir(exist_ok=True)``."""
    missing = []
    folder = path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
    if not path.is_dir():
        raise FileExistsError(f"{path.name} exists and is not a folder")
    return path


def private_opener(path: str | os.PathLike[str], flags: int) -> int:
    """An ``opener`` for ``open()``: a file it creates gets mode 0600."""
    return os.open(path, flags, FILE_MODE)


def open_private(path: Path, mode: str = "w", **kwargs: Any) -> IO[Any]:
    """``open(path, mode)``, creating the file with mode 0600 when it is missing."""
    return open(path, mode, opener=private_opener, **kwargs)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, created 0600 when missing."""
    with open_private(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def private_database(path: Path) -> None:
    """Create the (empty) database file ``path`` with mode 0600 before SQLite opens it.

    SQLite takes an empty file for an empty database, and gives the ``-wal``, ``-shm``
    and ``-journal`` files it creates later the mode of this one. An existing file is
    left as it is."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def narrow(path: Path) -> None:
    """Take the group and other bits off a file that orchmem takes in (a file dropped
    into ``ingest/``, moved on into ``processed/`` or ``rejected/``). A file another
    user owns cannot be changed and is left as it is: its folder is private anyway."""
    try:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & _SHARED_BITS and not path.is_symlink():
            os.chmod(path, mode & ~_SHARED_BITS)
    except PermissionError:
        pass


@dataclass(frozen=True)
class WideEntry:
    """A file or folder whose mode lets group or other users in."""

    path: Path
    mode: int
    is_dir: bool


def wide_entries(top: Path) -> Iterator[WideEntry]:
    """Every folder and file at or below ``top`` with group or other permission bits.

    Symbolic links are neither followed nor reported (their own mode means nothing);
    entries that vanish during the walk are skipped."""
    try:
        top_stat = top.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(top_stat.st_mode):
        return
    yield from _wide(top, top_stat)
    if not stat.S_ISDIR(top_stat.st_mode):
        return
    for folder, dirs, files in os.walk(top, followlinks=False):
        for name in (*dirs, *files):
            path = Path(folder) / name
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            yield from _wide(path, st)


def _wide(path: Path, st: os.stat_result) -> Iterator[WideEntry]:
    kind = stat.S_IFMT(st.st_mode)
    if kind not in (stat.S_IFDIR, stat.S_IFREG):
        return  # links, sockets, fifos: not data orchmem keeps
    if st.st_mode & _SHARED_BITS:
        yield WideEntry(path, stat.S_IMODE(st.st_mode), kind == stat.S_IFDIR)


def make_private(entry: WideEntry) -> None:
    """Take the group and other bits off ``entry`` (0755 becomes 0700, 0644 0600).

    The owner's bits stay as they are. ``entry`` was found by :func:`wide_entries`,
    which does not follow links, under a folder only its owner can write to."""
    os.chmod(entry.path, entry.mode & ~_SHARED_BITS)


def modes_report(settings: Settings, orchestrator_ids: Iterable[str], *, fix: bool = False
                 ) -> tuple[list[dict[str, str]], int]:
    """The entries wider than private under the root (broker folder included) and under
    the ``memory/`` folder of each orchestrator whose runtime root lies outside it;
    with ``fix``, each is narrowed first. Returns (the entries still wide, how many
    were narrowed).

    Entries are named relative to the root (``orchestrators/a/memory/memory.db``), or
    for an outside runtime root as ``<id>:memory/...``; never by an absolute path."""
    left: list[dict[str, str]] = []
    fixed = 0
    for label, base, top in _scanned(settings, orchestrator_ids):
        for entry in wide_entries(top):
            if fix:
                try:
                    make_private(entry)
                    fixed += 1
                    continue
                except FileNotFoundError:
                    continue  # gone since the walk (a -shm, a temp file)
                except OSError:
                    pass  # another user's file: reported as still wide
            rel = entry.path.relative_to(base).as_posix()
            left.append({"path": label + rel, "mode": f"{entry.mode:04o}"})
    return left, fixed


def _scanned(settings: Settings, orchestrator_ids: Iterable[str]
             ) -> list[tuple[str, Path, Path]]:
    """(label, base the names are relative to, folder to walk) for ``modes_report``."""
    root = os.path.realpath(settings.root)
    scanned = [("", Path(root), Path(root))]  # a root that is a link: the folder it names
    for orchestrator_id in sorted(orchestrator_ids):
        runtime_root = settings.runtime_root(orchestrator_id)
        real = os.path.realpath(runtime_root)
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            scanned.append((f"{orchestrator_id}:", Path(real), Path(real) / "memory"))
    return scanned
