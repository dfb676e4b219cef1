"""Episodes: ended runs, grouped with what they did and produced.

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

import re
from typing import Any

from orchmem.models.core.shapes import derive_id
from orchmem.models.execlog.rules import LOG_SCHEMA_VERSION
from orchmem.models.language import textquery
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.execlog import episodes as stored
from orchmem.models.storage.visibility import DEFAULT_VIEW, View

#: Version of the summarizer below, stored on every episode.
SUMMARIZER = "extractive-1"
MAX_SUMMARY_CHARS = 600
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_TEXT_KINDS = ("prompt", "note", "outcome", "run_end", "response")


def first_sentence(text: str, limit: int = 200) -> str:
    sentence = _SENTENCE.split(" ".join(text.split()), 1)[0]
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def _facts(events: list[tuple[Any, ...]]) -> dict[str, Any]:
    facts: dict[str, Any] = {"actors": [], "tools": [], "steps": [], "texts": {},
                             "outcome": None, "events": len(events)}
    for kind, name, status, actor, text, step_id in events:
        if actor and actor not in facts["actors"]:
            facts["actors"].append(actor)
        if kind == "tool_call" and name and name not in facts["tools"]:
            facts["tools"].append(name)
        step = name or step_id
        if kind == "step_start" and step and step not in facts["steps"]:
            facts["steps"].append(step)
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
    run = stored.run_row(odb, run_id)
    if run is None:
        return None
    facts = _facts(stored.run_events(odb, run_id))
    facts["outcome"] = run["outcome"] or facts["outcome"]
    title, summary = summarize(run["name"], facts)
    memory_ids = stored.memories_of_run(odb, run_id, run["conversation_id"])
    episode = {"episodeId": derive_id("ep", odb.orchestrator_id, run_id), "runId": run_id,
               "title": title, "summary": summary, "participants": facts["actors"],
               "tools": facts["tools"], "outcome": facts["outcome"],
               "startedAt": run["started_at"], "endedAt": run["ended_at"],
               "firstSeq": run["first_seq"], "lastSeq": run["last_seq"],
               "events": facts["events"], "memoryCount": len(memory_ids),
               "summarizer": SUMMARIZER, "schemaVersion": LOG_SCHEMA_VERSION}
    stored.save_episode(odb, episode, memory_ids, now)
    return str(episode["episodeId"])


def stale_runs(odb: OrchestratorDB, limit: int = 100) -> list[str]:
    """Ended runs whose episode does not cover their last event yet."""
    return stored.stale_runs(odb, limit)


def similar_episodes(odb: OrchestratorDB, query: str, limit: int = 3,
                     view: View = DEFAULT_VIEW) -> list[dict[str, Any]]:
    """The episodes ``view`` may see whose title or summary best match ``query`` (bm25
    over any of its terms), with the memories each produced that ``view`` sees; empty
    when there are none. An episode has the scope of its run (its session, else its
    conversation; its project; else global) and the sensitivity of the most sensitive
    memory it links (models/storage/execlog/episodes.py)."""
    terms = textquery.query_terms(query)
    if not terms:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    return stored.search(odb, match, limit, view)
