"""The log task: append execution-log events (and project the episodes of ended runs).

A normal write task on the one publish path (kind ``log``, outboxed like a
write-back): its events, the runs they advance, the episodes of the runs they end and
the task's receipt commit in one transaction.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.execlog.append import append_and_project
from orchmem.models.execlog.rules import check_log_request
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery import receipts
from orchmem.tasks.base import MemoryTask

LOG = "orchmem.log"


@shared_task(base=MemoryTask, bind=True, name=LOG, kind="log")
def log_events(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Append ``payload["events"]`` (a LogRequest) to the orchestrator's execution log.

    Returns ``{"ok", "eventIds", "appended", "replayed", "lastSeq", "episodeIds",
    "duplicate"}``; an event whose idempotency key is already in the log is counted
    in ``replayed`` and appends nothing.
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        request = check_log_request(payload, odb.orchestrator_id, odb.memory.log)
        now = format_ts(utc_now())
        with odb.write():
            stored = receipts.final_result_in_transaction(key)
            if stored is not None:
                return {**stored, "duplicate": True}
            result = {"ok": True, "task": self.name, "orchestratorId": odb.orchestrator_id,
                      "idempotencyKey": key,
                      **append_and_project(odb, key, list(request.events), now)}
            receipts.finish(key, receipts.DONE, result)
        odb.log.write("log_appended", key=key, appended=result["appended"],
                      replayed=result["replayed"], episodes=len(result["episodeIds"]))
        return {**result, "duplicate": False}

    return self.pipeline(orchestrator_id, payload, body)
