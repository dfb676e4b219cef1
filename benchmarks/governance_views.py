"""What the scope and sensitivity filter costs recall.

Builds one orchestrator of N memories as benchmarks/recall_latency.py does, then makes a
third of them session-scoped (over 50 sessions), a tenth project-scoped and 5%
restricted. For every query, in turn (the order rotates from query to query, so a
disturbance of the shared machine falls on all three), times ``recall()``:

- ``unfiltered``: the view's SQL replaced by a condition that is always true, recall
  without the governance filter (the seven governance columns are still read);
- ``default``: a request naming nothing (global, not restricted);
- ``session``: a request naming a session and a project.

JSON: p50/p95/p99 of each, and how many memories each returned on average.

    python benchmarks/governance_views.py [--size 10000] [--queries 200] [--root DIR]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from _harness import emit, percentiles, temp_root
from recall_latency import PEOPLE, QUESTIONS, THINGS, build

from orchmem.config import load_settings
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.recall.search import recall
from orchmem.models.storage import visibility
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.visibility import View

ORCH = "bench-views"


def spread(databases: Databases) -> None:
    odb = databases.open(ORCH)
    assert odb is not None
    with odb.write():
        odb.db.execute_sql("UPDATE memories SET scope = 'session', session_id = "
                           "'s-' || (id % 50) WHERE id % 3 = 0")
        odb.db.execute_sql("UPDATE memories SET scope = 'project', project_id = "
                           "'p-' || (id % 5) WHERE id % 10 = 1")
        odb.db.execute_sql("UPDATE memories SET sensitivity = 'restricted' WHERE id % 20 = 2")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--root")
    args = parser.parse_args()
    with temp_root(args.root) as root:
        settings = load_settings(environ={}, root=root, broker_url="")
        databases = Databases(settings)
        embedder = get_embedder(settings.embedding)
        built_s = build(databases, ORCH, args.size, embedder, seed=16)
        spread(databases)
        readers = Databases(settings, readonly=True)
        rng = random.Random(7)
        queries = [rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), t=rng.choice(THINGS))
                   for _ in range(args.queries)]
        real_sql = View.sql
        views: dict[str, View] = {"unfiltered": View(), "default": View(),
                                  "session": View(session_id="s-7", project_id="p-2")}
        times: dict[str, list[float]] = {name: [] for name in views}
        found: dict[str, int] = dict.fromkeys(views, 0)
        recall(ORCH, "warm up", databases=readers)
        for i, query in enumerate(queries):
            names = list(views)
            for name in names[i % 3:] + names[:i % 3]:
                visibility.View.sql = (  # type: ignore[method-assign]
                    (lambda self, alias="": ("1", [])) if name == "unfiltered" else real_sql)
                started = time.perf_counter()
                bundle = recall(ORCH, query, databases=readers, view=views[name])
                times[name].append((time.perf_counter() - started) * 1000)
                found[name] += len(bundle.nodes)
        visibility.View.sql = real_sql  # type: ignore[method-assign]
        out: dict[str, Any] = {"benchmark": "governance_views", "size": args.size,
                               "queries": args.queries, "build_s": round(built_s, 1)}
        for name in views:
            out[name] = {"recall_ms": percentiles(times[name]),
                         "returned_mean": round(found[name] / args.queries, 2)}
        emit(out)


if __name__ == "__main__":
    main()
