"""Appending to and reading the execution log (tables in logtables.py).

:func:`append` runs inside the caller's write transaction (the one that finishes the
task's receipt): each event is ``INSERT ... ON CONFLICT(event_id) DO NOTHING``, so a
replayed event (same idempotency key, same eventId) appends nothing, and its run's
row is created or advanced. Reads page by ``seq`` (a cursor), with the run or the
recorded time as the filter; each is one index range at any log size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchmem.models.core.shapes import format_ts
from orchmem.models.execlog.rules import (
    LOG_SCHEMA_VERSION,
    LogEventInput,
    digest_of,
    event_id_for,
)

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

_INSERT = (
    "INSERT INTO log_events (event_id, idempotency_key, run_id, step_id, span_id, "
    "parent_id, kind, name, status, actor, digest, text, data, checkpoint_ref, "
    "checkpoint_schema, parent_checkpoint_id, replay, schema_version, task_key, at, "
    "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(event_id) DO NOTHING")
_NEW_RUN = (
    "INSERT INTO log_runs (run_id, name, conversation_id, replay, status, outcome, "
    "started_at, ended_at, first_seq, last_seq, events, projected_seq, schema_version) "
    "VALUES (?, ?, ?, ?, 'open', NULL, ?, NULL, ?, ?, 1, 0, ?) "
    "ON CONFLICT(run_id) DO UPDATE SET last_seq = excluded.last_seq, "
    "events = events + 1, replay = max(replay, excluded.replay), "
    # An event after the run's episode was made makes that episode stale.
    "status = CASE status WHEN 'projected' THEN 'ended' ELSE status END, "
    "name = coalesce(name, excluded.name), "
    "conversation_id = coalesce(conversation_id, excluded.conversation_id)")
_END_RUN = ("UPDATE log_runs SET status = 'ended', outcome = ?, ended_at = ? "
            "WHERE run_id = ?")
#: The kind of a memory's snapshot on the log (tape.py): not part of a run's story.
SNAPSHOT_KIND = "memory_stored"
#: The condition on an event that keeps snapshots out of a run's story.
STORY = f"kind != '{SNAPSHOT_KIND}'"
COLUMNS = ("seq", "event_id", "idempotency_key", "run_id", "step_id", "span_id",
           "parent_id", "kind", "name", "status", "actor", "digest", "text", "data",
           "checkpoint_ref", "checkpoint_schema", "parent_checkpoint_id", "replay",
           "schema_version", "task_key", "at", "recorded_at")


@dataclass(frozen=True)
class Appended:
    event_ids: list[str]
    appended: list[str]
    ended_runs: list[str]
    last_seq: int


def append(odb: OrchestratorDB, key: str, events: list[LogEventInput], at: str,
           ) -> Appended:
    """Append ``events`` (inside the caller's write transaction); replays are skipped."""
    execute = odb.db.execute_sql
    ids: list[str] = []
    appended: list[str] = []
    ended: list[str] = []
    last = 0
    for position, event in enumerate(events):
        event_key = event.idempotency_key or f"{key}#{position}"
        event_id = event_id_for(odb.orchestrator_id, event_key)
        ids.append(event_id)
        cursor = execute(_INSERT, _row(event, event_id, event_key, key, at))
        if cursor.rowcount != 1:
            continue  # replayed: already in the log
        seq = int(cursor.lastrowid)
        appended.append(event_id)
        last = seq
        when = format_ts(event.at) if event.at else at
        conversation = (event.data or {}).get("conversationId")
        replay = event.replay or (event.kind == "replay_mode" and event.status != "off")
        execute(_NEW_RUN, (event.run_id, event.name if event.kind == "run_start" else None,
                           conversation if isinstance(conversation, str) else None,
                           int(replay), when, seq, seq, LOG_SCHEMA_VERSION))
        if event.kind == "run_end":
            execute(_END_RUN, (event.status or "ok", when, event.run_id))
            ended.append(event.run_id)
    return Appended(ids, appended, ended, last)


def _row(event: LogEventInput, event_id: str, event_key: str, key: str,
         at: str) -> tuple[Any, ...]:
    checkpoint = event.checkpoint
    digest = event.digest or (digest_of(event.text) if event.text is not None else None)
    return (event_id, event_key, event.run_id, event.step_id, event.span_id, event.parent_id,
            event.kind, event.name, event.status, event.actor, digest, event.text,
            json.dumps(event.data, ensure_ascii=False, sort_keys=True)
            if event.data is not None else None,
            checkpoint.ref if checkpoint else None,
            checkpoint.schema_version if checkpoint else None,
            checkpoint.parent_id if checkpoint else None,
            int(event.replay), LOG_SCHEMA_VERSION, key,
            format_ts(event.at) if event.at else at, at)


def has_log(odb: OrchestratorDB) -> bool:
    """Whether this file has the log's tables (a reader of a pre-schema-5 file has not)."""
    return bool(odb.sql("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                        "AND name = 'log_events'"))


def read_log(odb: OrchestratorDB, *, run_id: str | None = None, since: str | None = None,
             after: int = 0, limit: int = 100) -> tuple[list[dict[str, Any]], int | None]:
    """Events in append order after seq ``after``: of one run, and/or recorded at or
    after ``since``; returns ``(events, next cursor or None at the end)``."""
    if not has_log(odb):
        return [], None
    floor = after
    if since is not None:
        # The first event recorded at or after ``since``, found in the recorded_at index
        # (``min(seq)`` would walk the table from its start). Events are recorded in
        # seq order under the write lock, so this is also the smallest seq.
        found = odb.sql("SELECT seq FROM log_events WHERE recorded_at >= ? "
                        "ORDER BY recorded_at, seq LIMIT 1", (since,))
        if not found:
            return [], None
        floor = max(floor, int(found[0][0]) - 1)
    params: list[Any] = [floor]
    where = f"seq > ? AND {STORY}"
    if run_id is not None:
        where, params = f"run_id = ? AND seq > ? AND {STORY}", [run_id, floor]
    rows = odb.sql(f"SELECT {', '.join(COLUMNS)} FROM log_events WHERE {where} "
                   "ORDER BY seq LIMIT ?", (*params, limit + 1))
    events = [as_event(row) for row in rows[:limit]]
    cursor = int(events[-1]["seq"]) if len(rows) > limit and events else None
    return events, cursor


def tail_log(odb: OrchestratorDB, count: int, run_id: str | None = None
             ) -> list[dict[str, Any]]:
    """The last ``count`` events (of one run), in append order: one index range read
    backwards from the end."""
    if not has_log(odb):
        return []
    where, params = (f"WHERE run_id = ? AND {STORY}", [run_id]) if run_id is not None \
        else (f"WHERE {STORY}", [])
    rows = odb.sql(f"SELECT {', '.join(COLUMNS)} FROM log_events {where} "
                   "ORDER BY seq DESC LIMIT ?", (*params, count))
    return [as_event(row) for row in reversed(rows)]


def as_event(row: tuple[Any, ...]) -> dict[str, Any]:
    """One row as the camelCase JSON the CLI and the API show."""
    names = ("seq", "eventId", "idempotencyKey", "runId", "stepId", "spanId", "parentId",
             "kind", "name", "status", "actor", "digest", "text", "data", "checkpointRef",
             "checkpointSchemaVersion", "parentCheckpointId", "replay", "schemaVersion",
             "taskKey", "at", "recordedAt")
    event = {name: value for name, value in zip(names, row, strict=True) if value is not None}
    if event.get("kind") == SNAPSHOT_KIND:
        # a memory's snapshot (tape.py) is read by a rebuild alone: the memory itself is
        # read through visibility.py
        event.pop("data", None)
    if "data" in event:
        event["data"] = json.loads(event["data"])
        # a hard forget's marker (redaction.py): shown as its own field
        if isinstance(event["data"], dict) and "$redacted" in event["data"]:
            event["redacted"] = event["data"].pop("$redacted")
            if not event["data"]:
                del event["data"]
    event["replay"] = bool(row[17])
    return event


def event_by_id(odb: OrchestratorDB, event_id: str) -> dict[str, Any] | None:
    """One event by its eventId (the primary key), or None."""
    if not has_log(odb):
        return None
    rows = odb.sql(f"SELECT {', '.join(COLUMNS)} FROM log_events WHERE event_id = ?",
                   (event_id,))
    return as_event(rows[0]) if rows else None


def run_of(odb: OrchestratorDB, run_id: str) -> dict[str, Any] | None:
    """The run's row as JSON, or None."""
    if not has_log(odb):
        return None
    names = ("runId", "name", "conversationId", "replay", "status", "outcome", "startedAt",
             "endedAt", "firstSeq", "lastSeq", "events", "projectedSeq", "schemaVersion")
    rows = odb.sql(f"SELECT {', '.join(_snake(n) for n in names)} FROM log_runs "
                   "WHERE run_id = ?", (run_id,))
    if not rows:
        return None
    run = dict(zip(names, rows[0], strict=True))
    run["replay"] = bool(run["replay"])
    return run


def events_of_memory(odb: OrchestratorDB, memory_id: str) -> list[dict[str, Any]]:
    """The log events of the steps that produced ``memory_id`` (its sources name the
    run and the step): how a memory cites the log."""
    if not has_log(odb):
        return []
    rows = odb.sql(
        f"SELECT {', '.join('e.' + c for c in COLUMNS)} FROM memory_sources AS s "
        "JOIN log_events AS e ON e.run_id = s.workflow_run_id "
        "AND (s.step_id IS NULL OR e.step_id = s.step_id) "
        f"WHERE s.memory_id = ? AND e.{STORY} ORDER BY e.seq LIMIT 500", (memory_id,))
    return [as_event(row) for row in rows]


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def recent_runs(odb: OrchestratorDB, limit: int = 100) -> list[dict[str, Any]]:
    """The newest ``limit`` runs of the log (the console's execution log page)."""
    if not has_log(odb):
        return []
    names = ("runId", "name", "conversationId", "replay", "status", "outcome", "startedAt",
             "endedAt", "events")
    rows = odb.sql(f"SELECT {', '.join(_snake(n) for n in names)} FROM log_runs "
                   "ORDER BY first_seq DESC LIMIT ?", (limit,))
    return [{**dict(zip(names, row, strict=True)), "replay": bool(row[3])} for row in rows]
