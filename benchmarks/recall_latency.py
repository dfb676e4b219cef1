"""Recall latency at 1k, 10k and 100k memories (query embedding included, warm process).

Builds one orchestrator per size from generated sentences (embeddings computed in
batches, stored through the same store functions the worker uses), then times
``recall()`` for a set of generated queries: p50/p95/p99 in ms. It also times the
first recall of a fresh process (imports, model load, database open, index load).

    python benchmarks/recall_latency.py                  # 1k, 10k, 100k
    python benchmarks/recall_latency.py --sizes 1000 10000 --queries 200
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from pathlib import Path

from _harness import emit, percentiles, temp_root

from orchmem.config import load_settings
from orchmem.models.embedding import get_embedder
from orchmem.models.recall import recall
from orchmem.models.schema import MemoryInput, validate
from orchmem.models.storage.database import Databases
from orchmem.models.writeback import write_memories

PEOPLE = ["Alice", "Bob", "Chen", "Dana", "Emeka", "Farah", "Giulia", "Hiro", "Ines", "Jonas",
          "Kavya", "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq"]
VERBS = ["prefers", "decided to use", "wants to learn", "is planning", "finished", "asked about",
         "complained about", "recommended", "scheduled", "cancelled", "bought", "reviewed"]
THINGS = ["green tea", "the quarterly report", "a trip to Lisbon", "Rust for the parser",
          "the staging deploy", "a standing desk", "the onboarding guide", "PostgreSQL 16",
          "a budget of 40k", "the marketing offsite", "dark mode", "weekly retros",
          "the Kubernetes migration", "a piano lesson", "the security audit", "vegan recipes",
          "the customer churn model", "a bike to work", "the API rate limits", "jazz records"]
WHEN = ["on Monday", "last week", "in March", "before the release", "after lunch",
        "for next quarter", "every Friday", "by the end of the month", "yesterday", "in 2025"]
WHY = ["because it is faster", "to save money", "after a long discussion", "for the team",
       "since the old one broke", "as a personal goal", "to reduce risk", "for fun"]
QUESTIONS = ["What does {p} prefer?", "When did {p} schedule {t}?", "Who asked about {t}?",
             "What did {p} decide about {t}?", "Why did {p} cancel {t}?",
             "anything about {t}", "{p} {t}"]


def sentence(rng: random.Random, i: int) -> str:
    return (f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(WHEN)} "
            f"{rng.choice(WHY)} (note {i}).")


def build(databases: Databases, orch: str, size: int, embedder: object, seed: int) -> float:
    rng = random.Random(seed)
    odb = databases.open(orch)
    started = time.perf_counter()
    chunk = 2000
    for start in range(0, size, chunk):
        texts = [sentence(rng, i) for i in range(start, min(size, start + chunk))]
        vectors = list(embedder.encode(texts))  # type: ignore[attr-defined]
        memories = [validate(MemoryInput, {
            "type": rng.choice(["Fact", "Preference", "Decision", "Event", "Observation"]),
            "content": text, "importance": rng.randint(10, 90),
            "confidence": round(rng.uniform(0.5, 1.0), 2),
            "source": {"sourceType": "manual", "capturedBy": "system"}},
            workspace=odb.workspace) for text in texts]
        write_memories(odb, key=f"bench-{orch}-{start}", task="benchmark", memories=memories,
                       vectors=vectors, embedder=embedder.version)  # type: ignore[attr-defined]
    return time.perf_counter() - started


def first_recall_in_fresh_process(root: Path, orch: str) -> float:
    code = (
        "import time; t = time.perf_counter()\n"
        "from orchmem.config import load_settings\n"
        "from orchmem.models.storage.database import Databases\n"
        "from orchmem.models.recall import recall\n"
        f"s = load_settings(environ={{}}, root={str(root)!r})\n"
        f"recall({orch!r}, 'What does Alice prefer?', databases=Databases(s))\n"
        "print(time.perf_counter() - t)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--root", help="keep the databases here (default: a temp folder)")
    args = parser.parse_args()
    results = {}
    with temp_root(args.root) as root:
        settings = load_settings(environ={}, root=root, broker_url="")
        databases = Databases(settings)
        embedder = get_embedder(settings.embedding)
        rng = random.Random(7)
        queries = [rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), t=rng.choice(THINGS))
                   for _ in range(args.queries)]
        for size in args.sizes:
            orch = f"bench-recall-{size}"
            if databases.open(orch).meta("bench_size") != str(size):
                build_s = build(databases, orch, size, embedder, seed=size)
                with databases.open(orch).write():  # type: ignore[union-attr]
                    from orchmem.models.storage.events import set_meta
                    set_meta("bench_size", str(size))
            else:
                build_s = 0.0
            first = first_recall_in_fresh_process(root, orch)
            for query in queries[:20]:  # warm: index loaded, caches hot
                recall(orch, query, databases=databases)
            timings = []
            for query in queries:
                started = time.perf_counter()
                bundle = recall(orch, query, databases=databases)
                timings.append((time.perf_counter() - started) * 1000)
                assert bundle.nodes, query
            results[str(size)] = {"memories": size, "build_s": round(build_s, 1),
                                  "recall_ms": percentiles(timings),
                                  "first_recall_fresh_process_s": round(first, 2)}
    emit({"benchmark": "recall_latency", "queries": args.queries,
          "top_n": settings.memory.retrieval.top_n, "results": results})


if __name__ == "__main__":
    main()
