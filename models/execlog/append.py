"""Writing execution-log events inside a task's transaction: append them, then project
the episodes of the runs they end (and of runs whose episode went stale).

Both the log task and a write-back that carries its step's events (``logEvents``) call
:func:`append_and_project` inside their one write transaction, before the receipt:
the events, the memories and the receipt commit together or not at all.
"""

from __future__ import annotations

from typing import Any

from orchmem.models.execlog.episodes import project_run, stale_runs
from orchmem.models.execlog.rules import LogEventInput
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.execlog import entries as execlog
from orchmem.models.telemetry import names, spans


def append_and_project(odb: OrchestratorDB, key: str, events: list[LogEventInput],
                       now: str) -> dict[str, Any]:
    """Append ``events`` for the task ``key`` and project the episodes of the runs they
    end (inside the caller's write transaction). Returns ``{"eventIds", "appended",
    "replayed", "lastSeq", "episodeIds"}``; a replayed event appends nothing."""
    with spans.span(names.SPAN_LOG_APPEND, {names.ORCHESTRATOR: odb.orchestrator_id,
                                            names.KEY: key, names.COUNT: len(events)}) as span:
        done = execlog.append(odb, key, events, now)
        runs = list(dict.fromkeys([*done.ended_runs, *stale_runs(odb)]))
        episodes = [e for e in (project_run(odb, run, now) for run in runs) if e]
        if spans.enabled():
            appended = set(done.appended)
            span.update({names.APPENDED: len(done.appended),
                         names.REPLAYED: len(done.event_ids) - len(done.appended),
                         names.CHECKPOINTS: sum(
                             1 for event, event_id in zip(events, done.event_ids, strict=False)
                             if event.kind == "checkpoint" and event_id in appended),
                         names.EPISODES: len(episodes)})
    return {"eventIds": done.event_ids, "appended": len(done.appended),
            "replayed": len(done.event_ids) - len(done.appended),
            "lastSeq": done.last_seq, "episodeIds": episodes}
