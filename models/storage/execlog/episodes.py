"""Episode rows: reading a run for its projection, writing the episode, searching them
(the policy — what an episode says — is models/execlog/episodes.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from orchmem.models.storage.execlog.entries import STORY

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB
    from orchmem.models.storage.visibility import View


_COLUMNS = ("episode_id", "run_id", "title", "summary", "participants", "tools", "outcome",
            "started_at", "ended_at", "first_seq", "last_seq", "events", "memories",
            "summarizer", "schema_version")
_NAMES = ("episodeId", "runId", "title", "summary", "participants", "tools", "outcome",
          "startedAt", "endedAt", "firstSeq", "lastSeq", "events", "memoryCount",
          "summarizer", "schemaVersion")
_UPSERT = (
    f"INSERT INTO episodes ({', '.join(_COLUMNS)}, updated_at) "
    f"VALUES ({', '.join('?' * (len(_COLUMNS) + 1))}) "
    "ON CONFLICT(run_id) DO UPDATE SET title = excluded.title, summary = excluded.summary, "
    "participants = excluded.participants, tools = excluded.tools, "
    "outcome = excluded.outcome, ended_at = excluded.ended_at, "
    "last_seq = excluded.last_seq, events = excluded.events, "
    "memories = excluded.memories, summarizer = excluded.summarizer, "
    "schema_version = excluded.schema_version, updated_at = excluded.updated_at")


def run_row(odb: OrchestratorDB, run_id: str) -> dict[str, Any] | None:
    rows = odb.sql("SELECT name, conversation_id, outcome, started_at, ended_at, first_seq, "
                   "last_seq FROM log_runs WHERE run_id = ?", (run_id,))
    if not rows:
        return None
    names = ("name", "conversation_id", "outcome", "started_at", "ended_at", "first_seq",
             "last_seq")
    return dict(zip(names, rows[0], strict=True))


def run_events(odb: OrchestratorDB, run_id: str) -> list[tuple[Any, ...]]:
    """``(kind, name, status, actor, text, step_id)`` of the run's events, in order."""
    return odb.sql("SELECT kind, name, status, actor, text, step_id FROM log_events "
                   f"WHERE run_id = ? AND {STORY} ORDER BY seq", (run_id,))


def memories_of_run(odb: OrchestratorDB, run_id: str, conversation_id: str | None
                    ) -> list[str]:
    """Memories with a source naming the run (or the run's conversation)."""
    return [r[0] for r in odb.sql(
        "SELECT DISTINCT memory_id FROM memory_sources WHERE workflow_run_id = ? "
        "OR (? IS NOT NULL AND conversation_id = ?)", (run_id, conversation_id,
                                                        conversation_id))]


def save_episode(odb: OrchestratorDB, episode: dict[str, Any], memory_ids: list[str],
                 now: str) -> None:
    """Insert or replace the episode, its memory links, and mark its run projected
    (inside the caller's write transaction)."""
    values = [json.dumps(episode[n]) if n in ("participants", "tools") else episode[n]
              for n in _NAMES]
    odb.db.execute_sql(_UPSERT, (*values, now))
    odb.db.execute_sql("DELETE FROM episode_memories WHERE episode_id = ?",
                       (episode["episodeId"],))
    for memory_id in memory_ids:
        odb.db.execute_sql("INSERT OR IGNORE INTO episode_memories (episode_id, memory_id) "
                           "VALUES (?, ?)", (episode["episodeId"], memory_id))
    odb.db.execute_sql("UPDATE log_runs SET projected_seq = last_seq, status = 'projected' "
                       "WHERE run_id = ?",
                       (episode["runId"],))


def stale_runs(odb: OrchestratorDB, limit: int = 100) -> list[str]:
    """Ended runs whose episode does not cover their last event yet."""
    return [r[0] for r in odb.sql(
        "SELECT run_id FROM log_runs WHERE status = 'ended' LIMIT ?", (limit,))]


# Where an episode belongs, read from its run (no column holds it, so files of schema 5
# and 6 answer the same): the session its run_start named, else the run's conversation
# (a transcript's conversation is its session); the project its run_start named.
_RUN_START = ("(SELECT json_extract(l.data, '$.{key}') FROM log_events AS l "
              "WHERE l.run_id = ep.run_id AND l.kind = 'run_start' ORDER BY l.seq LIMIT 1)")
_SESSION = (f"coalesce({_RUN_START.format(key='sessionId')}, (SELECT r.conversation_id "
            "FROM log_runs AS r WHERE r.run_id = ep.run_id))")
_PROJECT = _RUN_START.format(key="projectId")
_RANKS = ("public", "internal", "confidential", "restricted")
#: The most sensitive of the memories it links (internal, a memory's default, if none).
_SENSITIVITY = (
    "coalesce((SELECT m.sensitivity FROM episode_memories AS em JOIN memories AS m "
    "ON m.memory_id = em.memory_id WHERE em.episode_id = ep.episode_id ORDER BY CASE "
    "m.sensitivity " + " ".join(f"WHEN '{n}' THEN {i}" for i, n in enumerate(_RANKS))
    + " ELSE 3 END DESC LIMIT 1), 'internal')")
#: One page of matches, best first, with their placement: computed for the page only
#: (for every match it cost 5x the search at 10k episodes: benchmarks/episode_views.py).
_PAGE = (
    "SELECT p.*, CASE WHEN p.session_id IS NOT NULL THEN 'session' "
    "WHEN p.project_id IS NOT NULL THEN 'project' ELSE 'global' END FROM (SELECT "
    f"{', '.join('ep.' + c for c in _COLUMNS)}, ep.rank, {_SESSION} AS session_id, "
    f"{_PROJECT} AS project_id, {_SENSITIVITY} AS sensitivity FROM (SELECT e.*, "
    "bm25(episode_fts) AS rank FROM episode_fts JOIN episodes AS e "
    "ON e.id = episode_fts.rowid WHERE episode_fts MATCH ? ORDER BY rank LIMIT ? OFFSET ?"
    ") AS ep) AS p")
_FIRST_PAGE = 16


def search(odb: OrchestratorDB, match: str, limit: int, view: View) -> list[dict[str, Any]]:
    """Episodes matching the FTS5 expression ``match`` that ``view`` may see, best first
    (bm25), each with its placement (``scope``, ``sessionId``, ``projectId``,
    ``sensitivity``) and up to 20 of the memories it links that ``view`` sees; empty
    when the file has no episodes yet (schema < 5).

    An episode is placed like a memory: in its run's session (or project, or global),
    as sensitive as the most sensitive memory it links, and ``view`` (tags aside: an
    episode has none) decides as it does for memories. Matches are read a page at a
    time, each page twice the last, until ``limit`` are seen or none are left."""
    if not odb.sql("SELECT 1 FROM sqlite_master WHERE name = 'episode_fts'"):
        return []
    found: list[dict[str, Any]] = []
    offset, page = 0, max(_FIRST_PAGE, 4 * limit)
    while len(found) < limit:
        rows = odb.sql(_PAGE, (match, page, offset))
        for row in rows:
            episode = _placed(row)
            # an episode carries no tags: the view's own stand in, so tags filter nothing;
            # an episode is of the episodic tier
            if view.sees(episode["scope"], episode["sessionId"], episode["projectId"],
                         episode["sensitivity"], list(view.tags), "episodic") \
                    and len(found) < limit:
                found.append(episode)
        if len(rows) < page:
            break
        offset, page = offset + page, 2 * page
    linked, params = view.sql("m")
    for episode in found:
        episode["memoryIds"] = [r[0] for r in odb.sql(
            "SELECT l.memory_id FROM episode_memories AS l JOIN memories AS m "
            f"ON m.memory_id = l.memory_id WHERE l.episode_id = ? AND {linked} "
            "ORDER BY l.memory_id LIMIT 20", (episode["episodeId"], *params))]
    return found


def _placed(row: tuple[Any, ...]) -> dict[str, Any]:
    names = (*_NAMES, "score", "sessionId", "projectId", "sensitivity", "scope")
    episode = dict(zip(names, row, strict=True))
    episode["participants"] = json.loads(episode["participants"])
    episode["tools"] = json.loads(episode["tools"])
    episode["score"] = round(-float(episode["score"]), 6)
    return episode
