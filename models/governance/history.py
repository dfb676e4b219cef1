"""A memory's history: the node, every audit event naming it, its edges and sources."""

from __future__ import annotations

from typing import Any

from orchmem.config import MemoryNotFound
from orchmem.models.core.shapes import check_memory_id
from orchmem.models.governance.restricted_reads import audit_restricted_get
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.history_reads import memory_history
from orchmem.models.storage.visibility import DEFAULT_VIEW, View


def history(odb: OrchestratorDB, memory_id: str, view: View = DEFAULT_VIEW, *,
            requester: str = "", purpose: str | None = None) -> dict[str, Any]:
    """``{"memory", "events", "edges", "sources"}`` of one memory as ``view`` sees it
    (models/storage/memories/history_reads.py), oldest event first; a view with restricted
    memories is a restricted read, audited with ``requester`` and ``purpose``.

    Raises ScopeViolation for another orchestrator's id, MemoryNotFound for an unknown one
    or one the view does not see (the two answers are the same).
    """
    check_memory_id(memory_id, odb.orchestrator_id)
    found = memory_history(odb, memory_id, view)
    if found is None:
        raise MemoryNotFound(f"{memory_id} is not a memory of {odb.orchestrator_id!r}")
    audit_restricted_get(odb, view, [found.node], requester or odb.orchestrator_id, purpose)
    return {
        "memory": {**found.node.dump(), "forgotten": found.forgotten,
                   "reinforcements": found.reinforcements, "subject": found.subject},
        "events": [{"id": e.id, "op": e.op, "at": e.at, "actor": e.actor,
                    "memoryIds": e.memory_ids, "before": e.before, "after": e.after,
                    "reason": e.reason, "idempotencyKey": e.idempotency_key}
                   for e in found.events],
        "edges": [edge.dump() for edge in found.edges],
        "sources": [{"sourceType": s.source.source_type.value,
                     "sourcePath": s.source.source_path,
                     "conversationId": s.source.conversation_id,
                     "workflowRunId": s.source.workflow_run_id, "stepId": s.source.step_id,
                     "capturedBy": s.source.captured_by.value, "capturedAt": s.captured_at}
                    for s in found.sources],
    }
