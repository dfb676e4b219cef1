"""The ingested files a hard forget deletes: those in ``ingest/processed/`` that hold the
forgotten memory's text.

A file is found by its sha256 (the ingest manifest keeps the hash of every file that
gave a memory), so a renamed copy (``notes.<sha>.md``) is found too. Only regular files
directly in ``processed/`` are looked at, never a symlink, and only while
``processed/`` itself resolves inside the orchestrator's runtime root: nothing outside
the workspace is ever read or deleted.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from orchmem.models.workspace.folders import Workspace, is_within

_CHUNK = 1 << 20


def processed_files_with(workspace: Workspace, hashes: Mapping[str, int]) -> list[str]:
    """Paths (as text, sorted) of the regular files in ``processed/`` whose sha256 is a
    key of ``hashes`` (``{sha256: size}``: only files of one of those sizes are read).
    Returns [] when there are none or ``processed/`` leaves the workspace."""
    wanted = set(hashes)
    sizes = set(hashes.values())
    folder = workspace.processed_dir
    if not wanted or not _inside(workspace, folder):
        return []
    found = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    for entry in entries:
        if (entry.is_file(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_size in sizes
                and _sha256(entry.path) in wanted):
            found.append(entry.path)
    return sorted(found)


def delete_files(workspace: Workspace, paths: Iterable[str]) -> list[str]:
    """Delete each of ``paths`` that is still a regular file in ``processed/`` (a path
    elsewhere is left alone); returns those that were there. Raises OSError when one
    cannot be deleted."""
    deleted = []
    folder = workspace.processed_dir
    for raw in paths:
        path = Path(raw)
        if path.parent != folder or not _inside(workspace, folder) or path.is_symlink():
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue  # deleted by an earlier delivery of the same forget
        deleted.append(raw)
    return deleted


def _inside(workspace: Workspace, folder: Path) -> bool:
    return is_within(os.path.realpath(folder), [os.path.realpath(workspace.runtime_root)])


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    try:
        # O_NOFOLLOW: a file swapped for a symlink since the scan is not followed.
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb", buffering=0) as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return ""
    return digest.hexdigest()
