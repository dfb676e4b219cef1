"""The bulletin task: build an orchestrator's bulletin and write its snapshot files; the
working task: rebuild ``working.md`` when it is dirty, for an injection that found it
stale (``MemoryClient.working_memory``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from celery import shared_task

from orchmem.models.bulletin import working as working_md
from orchmem.models.bulletin.compose import SNAPSHOT_JSON, SNAPSHOT_MD, Bulletin, build
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.workspace.atomic import write_atomically
from orchmem.models.workspace.private import private_dir
from orchmem.tasks.base import MemoryTask

logger = logging.getLogger(__name__)

BULLETIN = "orchmem.bulletin"
WORKING = "orchmem.working"

#: Inside :func:`snapshots_later`: the snapshot files the bulletin task left for the end
#: of the block, the last per folder (one pool job at a time: no lock needed).
_later: dict[Path, tuple[str, str]] | None = None


def write_bulletin(odb: OrchestratorDB, *, durable: bool = True) -> dict[str, Any]:
    """Build the bulletin of ``odb``'s orchestrator now and write ``bulletins/latest.json``
    and ``latest.md`` atomically. Returns the bulletin as JSON plus ``text``.

    ``durable=False``: the files are not fsynced (the bulletin task, once per message:
    two fsyncs were about half of a soak job's time; the client reads a lost or empty
    snapshot as none, and beat's refresh writes it again), and inside
    :func:`snapshots_later` they are written at the end of its block. A hard forget's
    rebuild, which must replace text on disk, keeps them."""
    built = build(odb, utc_now())
    data = built.to_dict()
    text = built.to_text()
    folder = odb.workspace.bulletins_dir
    files = (json.dumps(data, indent=2, ensure_ascii=False),
             f"# Memory bulletin of {odb.orchestrator_id}\n\n"
             f"_generated {data['generatedAt']}, events up to {data['watermark']}_"
             f"\n\n{text}\n")
    if _later is not None and not durable:
        _later[folder] = files
        return {**data, "text": text}
    if _later is not None:  # a durable rebuild: no older snapshot may land after it
        _later.pop(folder, None)
    _write_files(folder, files, durable=durable)
    return {**data, "text": text}


def _write_files(folder: Path, files: tuple[str, str], *, durable: bool) -> None:
    private_dir(folder)
    write_atomically(folder / SNAPSHOT_JSON, files[0], durable=durable)
    write_atomically(folder / SNAPSHOT_MD, files[1], durable=durable)


@contextmanager
def snapshots_later() -> Iterator[None]:
    """Within the block, the bulletin task leaves its snapshot files (not durable ones)
    to the block's end, and writes only the last of each orchestrator.

    A batching shard worker runs each pool job in this block (``run_batch``): a
    bulletin's caller gets its result, and the job's next orchestrator its turn,
    without waiting for files that only a fallback reads. The files are written before
    the job ends, so before anything that runs after it (a hard forget rebuilds them).
    One that cannot be written is logged: the client reads a missing snapshot as none.
    """
    global _later
    outer, _later = _later, {}
    try:
        yield
    finally:
        waiting, _later = _later, outer
        for folder, files in waiting.items():
            try:
                _write_files(folder, files, durable=False)
            except OSError as exc:
                logger.warning("bulletin snapshot in %s not written: %s", folder, exc)


@shared_task(base=MemoryTask, bind=True, name=BULLETIN, kind="bulletin", tracked=False,
             read_only=True)
def bulletin(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Build the bulletin, write ``bulletins/latest.json`` and ``latest.md`` atomically.

    Returns the bulletin as JSON (with ``watermark``, the last audit event it reflects)
    plus ``text``, the compact block for a prompt.
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        data = write_bulletin(odb, durable=False)
        odb.log.write("bulletin", watermark=data["watermark"], chars=data["chars"],
                      truncated=data["truncated"], taskId=self.request.id)
        return {"ok": True, "task": self.name, **data}

    def absent() -> dict[str, Any]:
        """An orchestrator with no memory yet: an empty bulletin, and no folder made."""
        empty = Bulletin.empty(orchestrator_id, format_ts(utc_now()))
        return {"ok": True, "task": self.name, **empty.to_dict(), "text": empty.to_text()}

    return self.pipeline(orchestrator_id, payload, body, absent=absent)


@shared_task(base=MemoryTask, bind=True, name=WORKING, kind="working", tracked=False,
             read_only=True)
def working(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Rebuild ``bulletins/working.md`` when it is dirty (models/bulletin/working.py),
    atomically under its lock; it only reads memory. Returns ``{"ok", "written",
    "watermark", "chars"}``."""

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        result = working_md.refresh(odb, utc_now())
        odb.log.write("working_refreshed", reason=str(payload.get("reason", ""))[:200],
                      **result)
        return {"ok": True, "task": self.name, **result}

    def absent() -> dict[str, Any]:
        return {"ok": False, "task": self.name, "message": "no memory yet"}

    return self.pipeline(orchestrator_id, payload, body, absent=absent)
