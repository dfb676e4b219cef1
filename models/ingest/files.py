"""The files of ``memory/ingest/``: which to take now, and their bytes, read safely.

A file is **claimed** before anything reads it: renamed into ``ingest/.inflight/``
under its own name. From then on the scan reads, commits and moves that one file,
whatever is dropped into ``ingest/`` meanwhile; a newer file renamed in under the same
name (the way to drop a file: docs/concepts/ingest.md#dropping-files) stays there for
the next scan. A file a scan stopped with (a crash, or a file that changed while being
read and whose name a newer file took) is still claimed: the next scan takes it from
``.inflight/`` first.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from orchmem.config.memory_settings import IngestSettings
from orchmem.models.ingest.outcomes import CHANGED, FileOutcome, reject
from orchmem.models.workspace.folders import Workspace, is_within
from orchmem.models.workspace.private import private_dir

EXTENSIONS = frozenset({".txt", ".md", ".json"})
_IGNORED = re.compile(r"^\.|\.(?:tmp|part|swp)$|~$")


@dataclass(frozen=True)
class Candidate:
    """A file to handle: its name in ingest/, and where it is (``claimed``: in .inflight/)."""

    name: str
    path: Path
    claimed: bool


def discover(workspace: Workspace, settings: IngestSettings, now: float | None = None
             ) -> tuple[list[Candidate], list[FileOutcome]]:
    """Files to handle now, those already claimed first, and those left for a later scan."""
    now = time.time() if now is None else now
    ready: list[Candidate] = []
    later: list[FileOutcome] = []
    for folder, claimed in ((workspace.inflight_dir, True), (workspace.ingest_dir, False)):
        for entry in _listing(folder):
            if _IGNORED.search(entry.name):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed since the listing: nothing to do
            if stat.S_ISDIR(info.st_mode) and not claimed:
                continue  # processed/, rejected/ and any operator folder
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime < settings.min_file_age_s:
                detail = f"modified less than {settings.min_file_age_s}s ago"
                later.append(FileOutcome(entry.name, "skipped", reason="too_new", detail=detail))
                continue
            ready.append(Candidate(entry.name, Path(entry.path), claimed))
    return ready, later


def settle_s(workspace: Workspace, settings: IngestSettings, now: float | None = None) -> float:
    """Seconds until every file in ``ingest/`` now is ``min_file_age_s`` old (0: none is
    too new), at most ``min_file_age_s``: what an explicit scan that waits for its
    result waits first, so that a file dropped just before it is taken, not skipped."""
    now = time.time() if now is None else now
    wait = 0.0
    for entry in _listing(workspace.ingest_dir):
        if _IGNORED.search(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode):
            wait = max(wait, settings.min_file_age_s - (now - info.st_mtime))
    return min(wait, settings.min_file_age_s)


def _listing(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return []


def claim(candidate: Candidate, workspace: Workspace) -> Candidate:
    """The candidate, renamed into ``.inflight/`` (unchanged when it already is there).

    Raises IngestRejected (reason ``CHANGED``) when the file vanished, or when a file of
    that name from an earlier scan is still claimed: the next scan takes it then.
    """
    if candidate.claimed:
        return candidate
    private_dir(workspace.inflight_dir)
    target = workspace.inflight_dir / candidate.name
    if os.path.lexists(target):
        raise reject(CHANGED, f"{candidate.name}: an earlier file of that name is still "
                     "being handled; the next scan takes this one")
    try:
        os.rename(candidate.path, target)
    except FileNotFoundError:
        raise reject(CHANGED, f"{candidate.name} disappeared before it was read") from None
    return Candidate(candidate.name, target, claimed=True)


def release(candidate: Candidate, workspace: Workspace) -> None:
    """Put a claimed file back into ingest/ for the next scan, never over a newer file.

    A hard link (which fails when the name is taken) rather than a rename (which would
    replace a newer file): when the name is taken, or the file is gone, it stays as it
    is, and a file still in ``.inflight/`` is taken from there by the next scan.
    """
    try:
        os.link(candidate.path, workspace.ingest_dir / candidate.name, follow_symlinks=False)
    except OSError:
        return
    os.unlink(candidate.path)


def read_checked(path: Path, workspace: Workspace, settings: IngestSettings) -> bytes:
    """The file's bytes after the file-system checks; raises IngestRejected.

    The bytes come from the very file checked: it is opened without following a
    symlink and without blocking, and the open descriptor must still be that regular
    file, of that size (reason ``CHANGED`` when it was replaced or is being written).
    """
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise reject(CHANGED, f"{path.name} disappeared before it was read") from None
    if stat.S_ISLNK(info.st_mode):
        raise reject("symlink", f"{path.name} is a symbolic link; drop the file itself")
    if not stat.S_ISREG(info.st_mode):
        raise reject("not_regular_file", f"{path.name} is not a regular file")
    canonical = os.path.realpath(path)
    if not is_within(canonical, workspace.allowed_roots()):
        raise reject("outside_workspace",
                     f"{path.name} resolves to {canonical}, outside the orchestrator's workspace")
    if path.suffix.lower() not in EXTENSIONS:
        raise reject("unsupported_extension",
                     f"{path.suffix or '(none)'} is not one of {', '.join(sorted(EXTENSIONS))}")
    limit = int(settings.max_file_size_mb * 1024 * 1024)
    if info.st_size > limit:
        raise reject("too_large", f"{info.st_size} bytes; the limit is {limit} "
                     f"(memory.ingest.max_file_size_mb = {settings.max_file_size_mb})")
    fd = _open_unfollowed(path)
    with os.fdopen(fd, "rb") as fh:
        _check_same_file(path.name, info, os.fstat(fd))
        data = fh.read(limit + 1)
    if len(data) != info.st_size:
        raise reject(CHANGED, f"{path.name} changed size while being read "
                     f"({info.st_size} bytes checked, {len(data)} read)")
    return data


#: Flags of the one open of an ingest file. O_NOFOLLOW: a file swapped for a symlink
#: after the checks is refused, not followed. O_NONBLOCK: one swapped for a FIFO makes
#: open return at once instead of waiting for a writer (it blocks the worker forever).
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_NOCTTY", 0))


def _open_unfollowed(path: Path) -> int:
    try:
        return os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise reject(CHANGED, f"{path.name} disappeared before it was read") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise reject("symlink", f"{path.name} became a symbolic link while being "
                         "checked; drop the file itself") from None
        raise reject("not_regular_file", f"{path.name}: {exc.strerror}") from None


def _check_same_file(name: str, checked: os.stat_result, opened: os.stat_result) -> None:
    """The descriptor must be the regular file that passed the checks (same inode, size)."""
    if not stat.S_ISREG(opened.st_mode):
        raise reject("not_regular_file", f"{name} was replaced by something other than a "
                     "regular file while being checked")
    if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
        raise reject(CHANGED, f"{name} was replaced while being checked")
    if opened.st_size != checked.st_size:
        raise reject(CHANGED, f"{name} changed size while being checked "
                     f"({checked.st_size} -> {opened.st_size} bytes)")


def size_of(path: Path) -> int:
    """The size of ``path`` itself (a symlink is not followed), 0 when it is gone."""
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def outside_workspace(workspace: Workspace) -> str | None:
    """Why the ingest folders resolve outside the workspace, or None when they do not.

    Checked before the scan creates or moves anything: with ``ingest/`` a symlink to
    another folder, processed/ and rejected/ would be made, and files moved, there.
    """
    roots = workspace.allowed_roots()
    for folder in (workspace.ingest_dir, workspace.processed_dir, workspace.rejected_dir,
                   workspace.inflight_dir):
        canonical = os.path.realpath(folder)
        if not is_within(canonical, roots):
            return (f"{folder} resolves to {canonical}, outside the orchestrator's workspace; "
                    "nothing there was read, moved or written")
    return None
