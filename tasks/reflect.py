"""The reflect task (topics, insights, proposals, crystals, working.md) and the review task.

Both are writes with a receipt, published on the one publish path: beat's fan-out
publishes ``reflect`` for each orchestrator whose memory changed since its last
reflection (or whose working.md is a day old); ``orchmem reflect`` and
``MemoryClient.reflect`` publish it on demand. ``review`` accepts or rejects one
evolves proposal (models/reflection/review.py).
"""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task

from orchmem.models.core.shapes import validate_with
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.reflection.crystals import load_summariser
from orchmem.models.reflection.review import REVIEW_ADAPTER, apply_review
from orchmem.models.reflection.stages import reflect
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.tasks.base import MemoryTask

REFLECT = "orchmem.reflect"
REVIEW = "orchmem.review"


@shared_task(base=MemoryTask, bind=True, name=REFLECT, kind="reflect")
def reflect_task(self: MemoryTask, orchestrator_id: str,
                 payload: dict[str, Any]) -> dict[str, Any]:
    """Reflect over one orchestrator's memory once (models/reflection/stages.py).

    Returns ``{"ok", "units", "topics", "topicsChanged", "conflictsOpened",
    "conflictsDismissed", "proposals", "autoApplied", "crystals", "crystalsBuilt",
    "crystalsRetracted", "working", "seconds": {stage: s}, "totalSeconds"}``; the same
    counts go to memory.log as a ``reflect`` event.
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        started = time.monotonic()
        counts = reflect(odb, get_embedder(self.settings.embedding), key=key,
                         summariser=load_summariser(odb.memory.reflect.summariser))
        result = {"ok": True, "task": self.name, "orchestratorId": orchestrator_id,
                  "idempotencyKey": key, **counts,
                  "totalSeconds": round(time.monotonic() - started, 3)}
        odb.log.write("reflect", **{k: v for k, v in result.items()
                                    if k not in ("ok", "task", "orchestratorId")})
        return result

    return self.pipeline(orchestrator_id, payload, body)


@shared_task(base=MemoryTask, bind=True, name=REVIEW, kind="review")
def review(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Accept or reject one proposal (``{"op": "accept" | "reject", "proposalId",
    "reason"?}``). Returns ``{"ok", "op", "proposalId", "relation", "status",
    "superseded", "edgeIds", "insightsDismissed", "duplicate"}``; refusals as in
    models/reflection/review.py."""

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        change = validate_with(REVIEW_ADAPTER, payload, workspace=odb.workspace, name="review")
        result = apply_review(odb, change, key=key, task=self.name)
        odb.log.write("review", op=change.op, proposalId=change.proposal_id,
                      status=result.get("status"), duplicate=result["duplicate"])
        return result

    return self.pipeline(orchestrator_id, payload, body)
