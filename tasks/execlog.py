"""The log task: append execution-log events (and project the episodes of ended runs).

A normal write task on the one publish path (kind ``log``, outboxed like a
write-back): its events, the runs they advance, the episodes of the runs they end and
the task's receipt commit in one transaction.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from orchmem.models.episodes import project_run, stale_runs
from orchmem.models.execlog import check_log_request
from orchmem.models.schema import format_ts, utc_now
from orchmem.models.storage import execlog, receipts
from orchmem.models.storage.database import OrchestratorDB

from .base import MemoryTask

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
            done = execlog.append(odb, key, list(request.events), now)
            runs = list(dict.fromkeys([*done.ended_runs, *stale_runs(odb)]))
            episodes = [e for e in (project_run(odb, run, now) for run in runs) if e]
            result = {"ok": True, "task": self.name, "orchestratorId": odb.orchestrator_id,
                      "idempotencyKey": key, "eventIds": done.event_ids,
                      "appended": len(done.appended),
                      "replayed": len(done.event_ids) - len(done.appended),
                      "lastSeq": done.last_seq, "episodeIds": episodes}
            receipts.finish(key, receipts.DONE, result)
        odb.log.write("log_appended", key=key, appended=result["appended"],
                      replayed=result["replayed"], episodes=len(episodes))
        return {**result, "duplicate": False}

    return self.pipeline(orchestrator_id, payload, body)
