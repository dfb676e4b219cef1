"""The execution log's archival reads and deletes (models/execlog/archive.py decides).

Events eligible for the archive were recorded before a cut, belong to runs whose
episode is made (status ``projected``: nothing will be projected from them again), and
are not audit-critical unless the policy says so. Audit-critical events are tool calls
and results (side effects), checkpoints, replay-mode and compensation events, and every
event of a replay. Memory snapshots (tape.py) are never archived: a rebuild from the log
reads them there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchmem.models.storage.execlog.entries import COLUMNS, STORY, as_event, has_log

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

#: Event kinds an archive keeps in the log unless its policy names them.
AUDIT_CRITICAL_KINDS = ("tool_call", "tool_result", "checkpoint", "replay_mode",
                        "compensation")
_NOT_CRITICAL = (f"AND kind NOT IN ({', '.join('?' * len(AUDIT_CRITICAL_KINDS))}) "
                 "AND replay = 0 ")


def archivable(odb: OrchestratorDB, before: str, *, audit_critical: bool,
               limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` events (by seq) recorded before ``before`` that may be
    archived (``audit_critical``: the audit-critical ones too)."""
    if not has_log(odb):
        return []
    params: list[Any] = [before, *(() if audit_critical else AUDIT_CRITICAL_KINDS), limit]
    rows = odb.sql(
        f"SELECT {', '.join(COLUMNS)} FROM log_events WHERE recorded_at < ? AND {STORY} "
        f"{'' if audit_critical else _NOT_CRITICAL}"
        "AND run_id IN (SELECT run_id FROM log_runs WHERE status = 'projected') "
        "ORDER BY seq LIMIT ?", params)
    return [as_event(row) for row in rows]


def kept_critical(odb: OrchestratorDB, before: str) -> int:
    """Audit-critical events recorded before ``before`` that the archive keeps."""
    if not has_log(odb):
        return 0
    rows = odb.sql(
        "SELECT count(*) FROM log_events WHERE recorded_at < ? AND (kind IN "
        f"({', '.join('?' * len(AUDIT_CRITICAL_KINDS))}) OR replay = 1)",
        (before, *AUDIT_CRITICAL_KINDS))
    return int(rows[0][0])


def delete_events(odb: OrchestratorDB, seqs: list[int]) -> int:
    """Delete the archived events (inside the caller's write transaction)."""
    deleted = 0
    for seq in seqs:
        deleted += odb.db.execute_sql("DELETE FROM log_events WHERE seq = ?", (seq,)).rowcount
    return deleted


def source_runs(odb: OrchestratorDB, memory_id: str) -> list[str]:
    """The runs ``memory_id``'s sources name (read before a hard forget deletes them)."""
    return [str(r[0]) for r in odb.sql(
        "SELECT DISTINCT workflow_run_id FROM memory_sources WHERE memory_id = ? "
        "AND workflow_run_id IS NOT NULL", (memory_id,))]
