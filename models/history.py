"""A memory's history: the node, every audit event naming it, its edges and sources."""

from __future__ import annotations

import json
from typing import Any

from orchmem.config import MemoryNotFound

from .schema import check_memory_id
from .storage.database import OrchestratorDB
from .storage.edges import edges_touching, row_to_edge
from .storage.memories import row_to_node
from .storage.tables import MemoryEventRow, MemoryRow, MemorySourceRow


def history(odb: OrchestratorDB, memory_id: str) -> dict[str, Any]:
    """``{"memory", "events", "edges", "sources"}`` of one memory, oldest event first.

    Raises ScopeViolation for another orchestrator's id, MemoryNotFound for an unknown one.
    """
    check_memory_id(memory_id, odb.orchestrator_id)
    with odb.read():
        row = MemoryRow.get_or_none(MemoryRow.memory_id == memory_id)
        if row is None:
            raise MemoryNotFound(f"{memory_id} is not a memory of {odb.orchestrator_id!r}")
        # memory_ids is a JSON list of ids; the quoted id cannot match inside another id.
        events = (MemoryEventRow.select()
                  .where(MemoryEventRow.memory_ids.contains(f'"{memory_id}"'))
                  .order_by(MemoryEventRow.id))
        sources = (MemorySourceRow.select().where(MemorySourceRow.memory == memory_id)
                   .order_by(MemorySourceRow.id))
        return {
            "memory": {**row_to_node(row, odb.orchestrator_id).dump(),
                       "forgotten": bool(row.forgotten), "reinforcements": row.reinforcements,
                       "subject": row.subject},
            "events": [{"id": e.id, "op": e.op, "at": e.at, "actor": e.actor,
                        "memoryIds": json.loads(e.memory_ids),
                        "before": json.loads(e.before) if e.before else None,
                        "after": json.loads(e.after) if e.after else None,
                        "reason": e.reason, "idempotencyKey": e.idempotency_key}
                       for e in events],
            "edges": [row_to_edge(e).dump() for e in edges_touching([memory_id])],
            "sources": [{"sourceType": s.source_type, "sourcePath": s.source_path,
                         "conversationId": s.conversation_id,
                         "workflowRunId": s.workflow_run_id, "stepId": s.step_id,
                         "capturedBy": s.captured_by, "capturedAt": s.captured_at}
                        for s in sources],
        }
