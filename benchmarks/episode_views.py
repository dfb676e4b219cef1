"""What placing episodes (scope from the run, sensitivity from the linked
memories) costs ``similar_episodes``.

Builds one orchestrator of N runs, each a step that logs its prompt and writes one
memory back in the same transaction (the write path of ``step.write_back``, without
embedding): a third of the runs in a session (over 50 sessions), a tenth in a project,
5% writing a restricted memory. For every query, in turn (the order rotates from query
to query, so a disturbance of the shared machine falls on all three), times:

- ``unplaced``: the episode search as it was before (FTS and the episodes row, every
  linked memory listed), copied here;
- ``default``: ``similar_episodes`` for a request naming nothing;
- ``session``: ``similar_episodes`` for a request naming a session and a project.

JSON: p50/p95/p99 of each (ms), and how many episodes each returned on average.

    python benchmarks/episode_views.py [--runs 1000] [--queries 200] [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from _harness import emit, percentiles, temp_root

from orchmem.config import load_settings
from orchmem.models.core.shapes import MemoryInput, format_ts, utc_now, validate
from orchmem.models.execlog.append import append_and_project
from orchmem.models.execlog.episodes import similar_episodes
from orchmem.models.execlog.rules import LogEventInput, new_run_id
from orchmem.models.language import textquery
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.visibility import View
from orchmem.models.writeback.apply import write_memories

ORCH = "bench-episodes"
SYSTEMS = ["billing", "search", "ledger", "gateway", "scheduler", "mailer", "auth", "cache",
           "payments", "exports", "reports", "indexer"]
ACTIONS = ["rotate the keys of", "roll back", "scale up", "patch", "migrate", "restart",
           "audit", "upgrade", "profile", "drain"]


def build(odb: OrchestratorDB, runs: int, rng: random.Random) -> None:
    for n in range(runs):
        run_id = new_run_id(ORCH)
        action, system = rng.choice(ACTIONS), rng.choice(SYSTEMS)
        data: dict[str, Any] = {}
        if n % 3 == 0:
            data["sessionId"] = f"s-{rng.randrange(50)}"
        if n % 10 == 1:
            data["projectId"] = f"p-{rng.randrange(5)}"
        events = [validate(LogEventInput, e) for e in (
            {"runId": run_id, "kind": "run_start", "name": f"{action} {system}",
             "data": data or None, "idempotencyKey": f"{run_id}/1"},
            {"runId": run_id, "kind": "prompt", "stepId": "s",
             "text": f"Please {action} {system} before the release {n}.",
             "idempotencyKey": f"{run_id}/2"},
            {"runId": run_id, "kind": "run_end", "status": "ok",
             "idempotencyKey": f"{run_id}/3"})]
        memory = validate(MemoryInput, {
            "type": "Fact", "content": f"We {action} {system} for release {n}",
            "sensitivity": "restricted" if n % 20 == 7 else "internal",
            "source": {"sourceType": "workflow_output", "capturedBy": "system",
                       "workflowRunId": run_id, "stepId": "s"}})
        key = f"bench-{n}"
        write_memories(odb, key=key, task="bench", memories=[memory],
                       also=lambda result, key=key, events=events: result.update(
                           log=append_and_project(odb, key, events, format_ts(utc_now()))))


def unplaced(odb: OrchestratorDB, query: str, limit: int = 3) -> list[dict[str, Any]]:
    """The episode search without placement: no scope or sensitivity filter (the placed
    one is models/storage/execlog/episodes.py)."""
    terms = textquery.query_terms(query)
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    rows = odb.sql("SELECT e.episode_id, e.run_id, e.title, e.summary, e.participants, "
                   "e.tools, bm25(episode_fts) FROM episode_fts JOIN episodes AS e "
                   "ON e.id = episode_fts.rowid WHERE episode_fts MATCH ? "
                   "ORDER BY bm25(episode_fts) LIMIT ?", (match, limit))
    found = []
    for row in rows:
        episode = {"episodeId": row[0], "runId": row[1], "title": row[2],
                   "summary": row[3], "participants": json.loads(row[4]),
                   "tools": json.loads(row[5]), "score": -float(row[6])}
        episode["memoryIds"] = [r[0] for r in odb.sql(
            "SELECT memory_id FROM episode_memories WHERE episode_id = ? LIMIT 20",
            (row[0],))]
        found.append(episode)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--root")
    args = parser.parse_args()
    rng = random.Random(18)
    with temp_root(args.root) as root:
        odb = Databases(load_settings(environ={}, root=root, broker_url="")).open(ORCH)
        assert odb is not None
        started = time.perf_counter()
        build(odb, args.runs, rng)
        built_s = time.perf_counter() - started
        kinds = {"unplaced": lambda q: unplaced(odb, q),
                 "default": lambda q: similar_episodes(odb, q, 3),
                 "session": lambda q: similar_episodes(
                     odb, q, 3, View(session_id=f"s-{rng.randrange(50)}",
                                     project_id=f"p-{rng.randrange(5)}"))}
        times: dict[str, list[float]] = {k: [] for k in kinds}
        found: dict[str, list[int]] = {k: [] for k in kinds}
        names = list(kinds)
        for n in range(args.queries):
            query = f"{rng.choice(ACTIONS)} {rng.choice(SYSTEMS)} again"
            for name in names[n % 3:] + names[:n % 3]:
                with odb.read():
                    began = time.perf_counter()
                    answer = kinds[name](query)
                    times[name].append((time.perf_counter() - began) * 1000)
                found[name].append(len(answer))
        emit({"runs": args.runs, "queries": args.queries, "build_s": round(built_s, 1),
              **{name: {**percentiles(times[name]),
                        "returned": round(sum(found[name]) / len(found[name]), 2)}
                 for name in names}})


if __name__ == "__main__":
    main()
