"""The bulletin task: build an orchestrator's bulletin and write its snapshot files."""

from __future__ import annotations

import json
from typing import Any

from celery import shared_task

from orchmem.models.atomic import write_atomically
from orchmem.models.bulletin import build
from orchmem.models.schema import utc_now
from orchmem.models.storage.database import OrchestratorDB

from .base import MemoryTask

BULLETIN = "orchmem.bulletin"


def write_bulletin(odb: OrchestratorDB, *, durable: bool = True) -> dict[str, Any]:
    """Build the bulletin of ``odb``'s orchestrator now and write ``bulletins/latest.json``
    and ``latest.md`` atomically. Returns the bulletin as JSON plus ``text``.

    ``durable=False``: the files are not fsynced (the bulletin task, once per message:
    two fsyncs were about half of a soak job's time; the client reads a lost or empty
    snapshot as none, and beat's refresh writes it again). A hard forget's rebuild,
    which must replace text on disk, keeps them."""
    built = build(odb, utc_now())
    data = built.to_dict()
    text = built.to_text()
    folder = odb.workspace.bulletins_dir
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(folder / "latest.json", json.dumps(data, indent=2, ensure_ascii=False),
                     durable=durable)
    write_atomically(folder / "latest.md", f"# Memory bulletin of {odb.orchestrator_id}\n\n"
                     f"_generated {data['generatedAt']}, events up to {data['watermark']}_"
                     f"\n\n{text}\n", durable=durable)
    return {**data, "text": text}


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

    return self.pipeline(orchestrator_id, payload, body)
