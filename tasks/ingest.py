"""The ingest scan task: every file in an orchestrator's ingest/ folder, exactly once."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from orchmem.config import MemoryDisabled
from orchmem.models.ingest.scan import scan
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.writeback.reconcile import Proposed
from orchmem.tasks.base import MemoryTask
from orchmem.tasks.publish import envelope, follow_up_key, send_envelope
from orchmem.tasks.writeback import embed_proposals

INGEST_SCAN = "orchmem.ingest_scan"


@shared_task(base=MemoryTask, bind=True, name=INGEST_SCAN, kind="ingest")
def ingest_scan(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Scan ``memory/ingest/``; returns counts (ingested, rejected, duplicate, repaired,
    skipped, remaining) and one entry per file. More files than one scan takes are left
    to a follow-up scan, published here. Raises MemoryDisabled when
    ``memory.ingest.enabled`` is false for this orchestrator, and ScopeViolation
    (``outside_workspace``, logged) when the ingest folders resolve outside its workspace.
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        if not odb.memory.ingest.enabled:
            raise MemoryDisabled(
                f"ingest is disabled for orchestrator {orchestrator_id!r} "
                "(memory.ingest.enabled = false); files stay in ingest/ untouched")

        def embed(items: list[Proposed]) -> tuple[list[Proposed], str | None]:
            return embed_proposals(self, odb, items)

        result = scan(odb, embed, self.name)
        follow_up = None
        if result["remaining"]:
            follow = envelope(orchestrator_id, self.name, "ingest",
                              {"idempotencyKey": follow_up_key(key)})
            follow_up = send_envelope(self.app, follow).id
        odb.log.write("ingest_scan", key=key, **{k: v for k, v in result.items()
                                                 if k != "files"}, followUp=follow_up)
        return {"ok": True, "task": self.name, "orchestratorId": orchestrator_id,
                "idempotencyKey": key, **result, "followUp": follow_up}

    return self.pipeline(orchestrator_id, payload, body)
