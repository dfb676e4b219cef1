"""Maintenance tasks: re-embedding (more jobs join this module as beat grows)."""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import shared_task

from orchmem.config import MemoryValidationError
from orchmem.models.database import OrchestratorDB
from orchmem.models.embedding import get_embedder
from orchmem.models.reembed import reembed_batch, remaining

from .base import MemoryTask, complete

logger = logging.getLogger(__name__)

REEMBED = "orchmem.reembed"
#: A run stops after this long and publishes its continuation, so that no single task
#: approaches the visibility timeout and other tasks of the shard get their turn.
DEFAULT_BUDGET_S = 120.0


def _positive(payload: dict[str, Any], name: str, default: float, cap: float) -> float:
    value = payload.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= cap:
        raise MemoryValidationError(f"{name} must be a number in (0, {cap}], got {value!r}",
                                    [{"path": name, "message": "out of range"}])
    return float(value)


@shared_task(base=MemoryTask, bind=True, name=REEMBED)
def reembed(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Embed memories whose vector is missing or from another embedder, in batches.

    Resumable: each batch commits on its own, and a run that exceeds its time budget
    (``budgetS``, default 120) publishes a continuation. Recall keeps answering
    throughout: from the vectors already moved, and from full text for the rest.
    Returns ``{"embedded", "remaining", "batches", "seconds", "embedder", "continued"}``.
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        budget = _positive(payload, "budgetS", DEFAULT_BUDGET_S, 3600)
        batch_size = int(_positive(payload, "batchSize",
                                   self.settings.embedding.batch_size, 4096))
        embedder = get_embedder(self.settings.embedding)
        started = time.monotonic()
        embedded = batches = 0
        while time.monotonic() - started < budget:
            done = reembed_batch(odb, embedder, batch_size)
            if done == 0:
                break
            embedded += done
            batches += 1
            left = remaining(odb, embedder.version)
            odb.log.write("reembed_progress", embedded=embedded, remaining=left,
                          embedder=embedder.version)
            logger.info("reembed %s: %d done, %d remaining", odb.orchestrator_id, embedded, left)
        left = remaining(odb, embedder.version)
        continued = None
        if left:
            follow = {**payload, "idempotencyKey": f"{key}+{batches}"}
            continued = self.apply_async(kwargs={"orchestrator_id": orchestrator_id,
                                                 "payload": follow}).id
        result = {"ok": True, "task": self.name, "orchestratorId": orchestrator_id,
                  "idempotencyKey": key, "embedded": embedded, "remaining": left,
                  "batches": batches, "embedder": embedder.version,
                  "seconds": round(time.monotonic() - started, 3), "continued": continued}
        odb.log.write("reembed", **{k: v for k, v in result.items() if k != "ok"})
        return complete(odb, key, result)

    return self.guarded(orchestrator_id, payload, "reembed", body)
