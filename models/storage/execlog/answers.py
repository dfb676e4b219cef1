"""The execution-log events that answer a *what happened* recall
(models/recall/log_answer.py), read under the reader's view.

A run is placed as its episode is (models/storage/execlog/episodes.py): in the session
its run_start named, else its conversation's; in the project its run_start named; as
sensitive as the most sensitive memory whose sources name the run (internal when none);
of the episodic tier. The reader's :class:`View` decides (tags aside: a run has none),
so a run the reader may not see gives no event, and is not even named.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from orchmem.models.storage.execlog.entries import COLUMNS, STORY, as_event, has_log

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB
    from orchmem.models.storage.visibility import View

_START = ("(SELECT json_extract(l.data, '$.{key}') FROM log_events AS l "
          "WHERE l.run_id = r.run_id AND l.kind = 'run_start' ORDER BY l.seq LIMIT 1)")
_RANKS = ("public", "internal", "confidential", "restricted")
_SENSITIVITY = (
    "coalesce((SELECT m.sensitivity FROM memory_sources AS s JOIN memories AS m "
    "ON m.memory_id = s.memory_id WHERE s.workflow_run_id = r.run_id AND m.forgotten = 0 "
    "ORDER BY CASE m.sensitivity "
    + " ".join(f"WHEN '{n}' THEN {i}" for i, n in enumerate(_RANKS))
    + " ELSE 3 END DESC LIMIT 1), 'internal')")
_PLACED = (f"SELECT r.run_id, coalesce({_START.format(key='sessionId')}, r.conversation_id), "
           f"{_START.format(key='projectId')}, {_SENSITIVITY}, r.started_at FROM log_runs AS r "
           "WHERE r.run_id IN (SELECT value FROM json_each(?))")


def visible_runs(odb: OrchestratorDB, run_ids: Sequence[str], view: View) -> list[str]:
    """Those of ``run_ids`` that exist and that ``view`` sees, oldest first."""
    if not run_ids or not has_log(odb):
        return []
    seen = []
    for run_id, session, project, sensitivity, started in odb.sql(
            _PLACED, (json.dumps(sorted(set(run_ids))),)):
        scope = "session" if session else ("project" if project else "global")
        if view.sees(scope, session, project, sensitivity, list(view.tags), "episodic"):
            seen.append((started, run_id))
    return [r for _, r in sorted(seen)]


def runs_of_memories(odb: OrchestratorDB, memory_ids: Sequence[str]) -> list[str]:
    """The workflow runs that ``memory_ids``' sources name."""
    if not memory_ids:
        return []
    return [r[0] for r in odb.sql(
        "SELECT DISTINCT workflow_run_id FROM memory_sources WHERE workflow_run_id IS NOT "
        "NULL AND memory_id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(memory_ids)),))]


def runs_between(odb: OrchestratorDB, start: str | None, end: str | None,
                 limit: int) -> list[str]:
    """Runs started in [start, end) (either open), newest first, at most ``limit``."""
    if not has_log(odb):
        return []
    return [r[0] for r in odb.sql(
        "SELECT run_id FROM log_runs WHERE started_at >= ? AND started_at < ? "
        "ORDER BY started_at DESC, run_id LIMIT ?",
        (start or "", end or "\uffff", limit))]


def events_of_runs(odb: OrchestratorDB, run_ids: Sequence[str], after: int,
                   limit: int) -> tuple[list[dict[str, Any]], int | None]:
    """The events of ``run_ids`` after seq ``after``, in append (chronological) order,
    at most ``limit``; returns ``(events, next cursor or None at the end)``."""
    if not run_ids:
        return [], None
    rows = odb.sql(f"SELECT {', '.join(COLUMNS)} FROM log_events WHERE run_id IN "
                   f"(SELECT value FROM json_each(?)) AND seq > ? AND {STORY} ORDER BY seq LIMIT ?",
                   (json.dumps(list(run_ids)), after, limit + 1))
    events = [as_event(row) for row in rows[:limit]]
    return events, (int(events[-1]["seq"]) if len(rows) > limit and events else None)
