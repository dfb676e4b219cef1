"""Files made to last: a small file replaced atomically (readers see the old text or the
new, never half), a path synced to disk, a file's digest."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from orchmem.models.workspace.private import open_private


def write_atomically(path: Path, text: str, *, durable: bool = True) -> None:
    """Write ``text`` to a temp file beside ``path``, fsync it, rename it over ``path``.
    The file is created 0600 (private.py).

    ``durable=False``: no fsync (a snapshot rebuilt from the database whenever it is
    lost): a crashed process still leaves the old text or the new, but a power loss may
    leave the file empty or gone; its readers must treat that as no snapshot."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open_private(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)


def fsync_path(path: Path) -> None:
    """Flush ``path`` (a file, or a folder after a rename inside it) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_sha256(path: Path) -> str:
    """The SHA-256 of the file at ``path``, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()
