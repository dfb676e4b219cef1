"""Episodes: ended runs, grouped with what they did and produced (issue 18, item 2).

An episode is a projection of one run of the execution log: who took part (the
events' actors), which tools were called, the outcome, an extractive summary (whole
sentences copied from the run's own texts: its name, its first prompt, its outcome),
the seq range of its events (its log pointers) and the memories it produced (every
memory with a source naming the run, or the run's conversation), linked in
``episode_memories``. :func:`project_run` builds or rebuilds one inside the log
task's transaction when its run ends; events appended to an ended run make it stale
until the next projection (``orchmem stats`` reports that lag, see watermark.py).

Recall finds episodes for "a similar past case" by full text over title and summary
(:func:`similar_episodes`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import textquery
from .execlog import LOG_SCHEMA_VERSION
from .schema import derive_id
from .storage.database import OrchestratorDB

#: Version of the summarizer below, stored on every episode.
SUMMARIZER = "extractive-1"
MAX_SUMMARY_CHARS = 600
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_TEXT_KINDS = ("prompt", "note", "outcome", "run_end", "response")


def first_sentence(text: str, limit: int = 200) -> str:
    sentence = _SENTENCE.split(" ".join(text.split()), 1)[0]
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def _facts(odb: OrchestratorDB, run_id: str) -> dict[str, Any]:
    rows = odb.sql("SELECT kind, name, status, actor, text, step_id, seq FROM log_events "
                   "WHERE run_id = ? ORDER BY seq", (run_id,))
    facts: dict[str, Any] = {"actors": [], "tools": [], "steps": [], "texts": {},
                             "outcome": None, "events": len(rows)}
    for kind, name, status, actor, text, step_id, _ in rows:
        if actor and actor not in facts["actors"]:
            facts["actors"].append(actor)
        if kind == "tool_call" and name and name not in facts["tools"]:
            facts["tools"].append(name)
        if kind == "step_start" and (name or step_id) and (name or step_id) not in facts["steps"]:
            facts["steps"].append(name or step_id)
        if kind in ("outcome", "run_end") and status:
            facts["outcome"] = status
        if text and kind in _TEXT_KINDS:
            facts["texts"].setdefault(kind, first_sentence(text))
    return facts


def summarize(name: str | None, facts: dict[str, Any]) -> tuple[str, str]:
    """(title, summary): sentences taken from the run's own texts, bounded."""
    texts = facts["texts"]
    title = name or texts.get("prompt") or texts.get("note") or "run"
    parts = [p for p in (texts.get("prompt"), texts.get("note")) if p and p != title]
    if facts["steps"]:
        parts.append("Steps: " + ", ".join(facts["steps"][:12]) + ".")
    if facts["tools"]:
        parts.append("Tools: " + ", ".join(facts["tools"][:12]) + ".")
    ending = texts.get("outcome") or texts.get("run_end") or texts.get("response")
    parts.append(f"Outcome: {facts['outcome'] or 'unknown'}." + (f" {ending}" if ending else ""))
    summary = " ".join(parts)
    if len(summary) > MAX_SUMMARY_CHARS:
        summary = summary[: MAX_SUMMARY_CHARS - 1].rstrip() + "…"
    return first_sentence(title, 200), summary


def project_run(odb: OrchestratorDB, run_id: str, now: str) -> str | None:
    """Build or rebuild the episode of ``run_id`` (inside a write transaction); returns
    its episodeId, or None when the run is unknown."""
    runs = odb.sql("SELECT name, conversation_id, outcome, started_at, ended_at, first_seq, "
                   "last_seq FROM log_runs WHERE run_id = ?", (run_id,))
    if not runs:
        return None
    name, conversation, outcome, started, ended, first_seq, last_seq = runs[0]
    facts = _facts(odb, run_id)
    facts["outcome"] = outcome or facts["outcome"]
    title, summary = summarize(name, facts)
    episode_id = derive_id("ep", odb.orchestrator_id, run_id)
    memory_ids = [r[0] for r in odb.sql(
        "SELECT DISTINCT memory_id FROM memory_sources WHERE workflow_run_id = ? "
        "OR (? IS NOT NULL AND conversation_id = ?)", (run_id, conversation, conversation))]
    odb.db.execute_sql(
        "INSERT INTO episodes (episode_id, run_id, title, summary, participants, tools, "
        "outcome, started_at, ended_at, first_seq, last_seq, events, memories, summarizer, "
        "schema_version, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(run_id) DO UPDATE SET title = excluded.title, summary = excluded.summary, "
        "participants = excluded.participants, tools = excluded.tools, "
        "outcome = excluded.outcome, ended_at = excluded.ended_at, "
        "last_seq = excluded.last_seq, events = excluded.events, "
        "memories = excluded.memories, summarizer = excluded.summarizer, "
        "schema_version = excluded.schema_version, updated_at = excluded.updated_at",
        (episode_id, run_id, title, summary, json.dumps(facts["actors"]),
         json.dumps(facts["tools"]), facts["outcome"], started, ended, first_seq, last_seq,
         facts["events"], len(memory_ids), SUMMARIZER, LOG_SCHEMA_VERSION, now))
    odb.db.execute_sql("DELETE FROM episode_memories WHERE episode_id = ?", (episode_id,))
    for memory_id in memory_ids:
        odb.db.execute_sql("INSERT OR IGNORE INTO episode_memories (episode_id, memory_id) "
                           "VALUES (?, ?)", (episode_id, memory_id))
    odb.db.execute_sql("UPDATE log_runs SET projected_seq = last_seq WHERE run_id = ?",
                       (run_id,))
    return episode_id


def stale_runs(odb: OrchestratorDB, limit: int = 100) -> list[str]:
    """Ended runs whose episode does not cover their last event yet."""
    return [r[0] for r in odb.sql(
        "SELECT run_id FROM log_runs WHERE status = 'ended' AND projected_seq < last_seq "
        "LIMIT ?", (limit,))]


_EPISODE_COLUMNS = ("episode_id", "run_id", "title", "summary", "participants", "tools",
                    "outcome", "started_at", "ended_at", "first_seq", "last_seq", "events",
                    "memories", "summarizer", "schema_version")


def similar_episodes(odb: OrchestratorDB, query: str, limit: int = 3) -> list[dict[str, Any]]:
    """The episodes whose title or summary best match ``query`` (bm25), with the
    memories each produced; empty when the file has no episodes table yet."""
    terms = textquery.query_terms(query)
    if not terms or not odb.sql("SELECT 1 FROM sqlite_master WHERE name = 'episode_fts'"):
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    rows = odb.sql(
        f"SELECT {', '.join('e.' + c for c in _EPISODE_COLUMNS)}, bm25(episode_fts) "
        "FROM episode_fts JOIN episodes AS e ON e.id = episode_fts.rowid "
        "WHERE episode_fts MATCH ? ORDER BY bm25(episode_fts) LIMIT ?", (match, limit))
    return [_as_episode(odb, row) for row in rows]


def _as_episode(odb: OrchestratorDB, row: tuple[Any, ...]) -> dict[str, Any]:
    names = ("episodeId", "runId", "title", "summary", "participants", "tools", "outcome",
             "startedAt", "endedAt", "firstSeq", "lastSeq", "events", "memoryCount",
             "summarizer", "schemaVersion")
    episode = dict(zip(names, row[:-1], strict=True))
    episode["participants"] = json.loads(episode["participants"])
    episode["tools"] = json.loads(episode["tools"])
    episode["score"] = round(-float(row[-1]), 6)
    episode["memoryIds"] = [r[0] for r in odb.sql(
        "SELECT memory_id FROM episode_memories WHERE episode_id = ? LIMIT 20",
        (episode["episodeId"],))]
    return episode
