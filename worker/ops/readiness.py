"""Readiness files: how ``orchmem up`` learns that a part it started is ready.

``orchmem up`` starts each worker, the reader and beat with ``--ready-file PATH``; the
child writes its pid there once it consumes its queues (a worker or the reader, after
Celery's ``worker_ready``; the reader has loaded the model by then) or once beat's
scheduler starts (``beat_init``). The pid tells a file written by this run's child
from one left by an earlier process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from orchmem.models.workspace.private import private_dir, write_private


def ready_file_option(func: Any) -> Any:
    """``--ready-file PATH`` (hidden): set by ``orchmem up`` for each part it starts."""
    return click.option("--ready-file", type=click.Path(dir_okay=False), hidden=True,
                        help="Write this process's pid here once it is ready.")(func)


def write_ready(path: str | Path) -> None:
    """Write this process's pid to ``path`` (atomically: never a half-written file)."""
    target = Path(path)
    private_dir(target.parent)
    partial = target.with_name(target.name + ".tmp")
    write_private(partial, str(os.getpid()))
    partial.replace(target)


def on_ready(signal: Any, path: str | None) -> None:
    """Write ``path`` when ``signal`` (a Celery signal) is sent; nothing without a path."""
    if path is None:
        return

    def mark(*_args: Any, **_kwargs: Any) -> None:
        write_ready(path)

    signal.connect(mark, weak=False)


def is_ready(path: Path, pid: int) -> bool:
    """Whether the process ``pid`` has written ``path``."""
    try:
        return path.read_text().strip() == str(pid)
    except OSError:
        return False
