"""Erasing words from the execution log and its episodes (a hard forget).

A log event is never deleted: its row keeps its id, kind, names, digest, idempotency
key and times, so the log still says that something happened and a replay still
appends nothing. Its ``text`` goes, and so does its ``data`` except the ids a run's
placement needs (:data:`KEPT_DATA_KEYS`); ``data`` then carries the marker
``{"$redacted": {"at": <time>, "by": <why>}}`` (the schema has no column for it, and
the marker's ``$`` key is one no caller's event needs). An episode keeps its row; its
title and summary are rewritten (models/governance/log_forget.py says how) and ``episode_fts``
is merged (``optimize``) so no segment keeps the old tokens.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from orchmem.models.storage.execlog.entries import STORY, has_log
from orchmem.models.storage.search.fts import optimize_index

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

#: The key of the marker a redacted event's ``data`` carries.
REDACTED = "$redacted"
#: Ids in a run's ``data`` that say where its episode belongs: kept by a redaction.
KEPT_DATA_KEYS = ("conversationId", "sessionId", "projectId")
#: Most events one statement names (SQLite's default variable limit is 32766).
_CHUNK = 500


def cited_events(odb: OrchestratorDB, memory_id: str) -> list[int]:
    """Seqs of the log events ``memory_id``'s provenance cites (its sources' run and
    step; every event of the run when a source names no step). Read it before the
    sources are erased."""
    if not has_log(odb):
        return []
    return [r[0] for r in odb.sql(
        "SELECT DISTINCT e.seq FROM memory_sources AS s JOIN log_events AS e "
        "ON e.run_id = s.workflow_run_id AND (s.step_id IS NULL OR e.step_id = s.step_id) "
        f"WHERE s.memory_id = ? AND e.{STORY} ORDER BY e.seq", (memory_id,))]


def runs_selected(odb: OrchestratorDB, run_id: str | None,
                  conversation_id: str | None) -> list[str]:
    """The run ``run_id`` (when logged) and every run of ``conversation_id``."""
    if not has_log(odb):
        return []
    return [r[0] for r in odb.sql(
        "SELECT run_id FROM log_runs WHERE run_id = ? OR (? IS NOT NULL AND "
        "conversation_id = ?) ORDER BY first_seq", (run_id, conversation_id,
                                                    conversation_id))]


def events_of_runs(odb: OrchestratorDB, run_ids: Sequence[str]) -> list[int]:
    """Seqs of every event of ``run_ids`` but the memory snapshots (tape.py: those of a
    forgotten memory go with its own forget, the others' words are in their rows)."""
    seqs: list[int] = []
    for start in range(0, len(run_ids), _CHUNK):
        chunk = list(run_ids[start:start + _CHUNK])
        seqs += [r[0] for r in odb.sql(
            "SELECT seq FROM log_events WHERE run_id IN (SELECT value FROM json_each(?)) "
            f"AND {STORY}",
            (json.dumps(chunk),))]
    return sorted(set(seqs))


def redact_events(odb: OrchestratorDB, seqs: Sequence[int], at: str, by: str
                  ) -> tuple[int, list[str]]:
    """Erase the text and data (ids of KEPT_DATA_KEYS kept) of the events ``seqs``
    (inside a write transaction); returns ``(events that had words, their runs)``."""
    changed = 0
    runs: list[str] = []
    for start in range(0, len(seqs), _CHUNK):
        rows = odb.sql("SELECT seq, run_id, text, data FROM log_events WHERE seq IN "
                       "(SELECT value FROM json_each(?))",
                       (json.dumps(list(seqs[start:start + _CHUNK])),))
        for seq, run_id, text, data in rows:
            kept = _kept(data)
            if text is None and (data is None or (kept is not None and set(kept) <= {
                    REDACTED, *KEPT_DATA_KEYS})):
                continue  # no words: never had any, or already redacted
            kept = kept or {}
            marker = {**{k: v for k, v in kept.items() if k in KEPT_DATA_KEYS},
                      REDACTED: {"at": at, "by": by}}
            odb.db.execute_sql("UPDATE log_events SET text = NULL, data = ? WHERE seq = ?",
                               (json.dumps(marker, sort_keys=True), seq))
            changed += 1
            if run_id not in runs:
                runs.append(run_id)
    return changed, runs


def _kept(data: str | None) -> dict[str, Any] | None:
    """``data`` as an object; None when it is JSON of another kind (all words)."""
    value = json.loads(data) if data is not None else {}
    return value if isinstance(value, dict) else None


def projected_runs(odb: OrchestratorDB, run_ids: Sequence[str]) -> list[str]:
    """Those of ``run_ids`` that have an episode (an open run gets one when it ends)."""
    return [r[0] for r in odb.sql(
        "SELECT run_id FROM episodes WHERE run_id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(run_ids)),))]


def runs_of_memory(odb: OrchestratorDB, memory_id: str) -> list[str]:
    """Runs of the episodes that link ``memory_id``."""
    return [r[0] for r in odb.sql(
        "SELECT e.run_id FROM episode_memories AS l JOIN episodes AS e "
        "ON e.episode_id = l.episode_id WHERE l.memory_id = ?", (memory_id,))]


def episodes_matching(odb: OrchestratorDB, match: str, limit: int = 10_000
                      ) -> list[str]:
    """Run ids of the episodes whose title or summary match the FTS5 expression."""
    return [r[0] for r in odb.sql(
        "SELECT e.run_id FROM episode_fts JOIN episodes AS e ON e.id = episode_fts.rowid "
        "WHERE episode_fts MATCH ? LIMIT ?", (match, limit))]


def episode_texts(odb: OrchestratorDB, run_ids: Sequence[str]
                  ) -> list[tuple[str, str, str]]:
    """``(run_id, title, summary)`` of the episodes of ``run_ids``."""
    return [(r[0], r[1], r[2]) for r in odb.sql(
        "SELECT run_id, title, summary FROM episodes WHERE run_id IN "
        "(SELECT value FROM json_each(?))", (json.dumps(list(run_ids)),))]


def rewrite_episode(odb: OrchestratorDB, run_id: str, title: str, summary: str,
                    at: str) -> None:
    """Replace the episode's title and summary (its FTS rows follow by trigger)."""
    odb.db.execute_sql("UPDATE episodes SET title = ?, summary = ?, updated_at = ? "
                       "WHERE run_id = ?", (title, summary, at, run_id))


def merge_episode_index(odb: OrchestratorDB) -> None:
    """Merge every segment of ``episode_fts``: deleted tokens leave the index only then."""
    optimize_index(odb, "episode_fts")
