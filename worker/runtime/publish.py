"""Publishing from the operator's side (CLI, tests, benchmarks): one call, the one path.

A thin edge over :mod:`orchmem.tasks.publish`: it builds the envelope and, for a
user's request, records it in the orchestrator's outbox first, exactly as the client
does, so a CLI write during a broker outage is kept and sent later.
"""

from __future__ import annotations

from typing import Any

from celery.result import AsyncResult

from orchmem.models.storage.delivery.outbox import Outbox
from orchmem.models.workspace.folders import Workspace
from orchmem.tasks.publish import envelope
from orchmem.tasks.publish import publish as publish_envelope
from orchmem.worker.runtime.app import OrchmemCelery


def publish(app: OrchmemCelery, task_name: str, orchestrator_id: str, kind: str,
            payload: dict[str, Any]) -> tuple[str, AsyncResult]:
    """Publish one request for ``orchestrator_id``; returns ``(idempotency key, handle)``.

    Raises MemoryValidationError (bad id or key) or BrokerUnavailable (the request is
    then kept in the outbox when it is a user's). An outbox that cannot be written (a
    read-only or full folder) is logged and the request is sent without it.
    """
    env = envelope(orchestrator_id, task_name, kind, payload)
    outbox = None
    if env.durable:
        workspace = Workspace.for_orchestrator(app.settings, orchestrator_id)
        outbox = Outbox(workspace.outbox_path, app.settings.worker.busy_timeout_ms)
    try:
        return env.key, publish_envelope(app, env, outbox, outbox_required=False)
    finally:
        if outbox is not None:
            outbox.close()
