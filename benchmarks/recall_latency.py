"""Recall latency: the query embedding alone and the whole recall, per embedding backend,
at 1k / 10k / 100k memories, idle and with a write-back load running.

Builds one orchestrator per size from generated sentences (stored through the same
functions the worker uses), then, for every query, times ``embedder.encode_one`` and
``recall()`` for each backend in turn (the order alternates from one query to the
next, so a disturbance of the shared machine falls on both). The query-vector cache
is off: every recall runs the model. Conditions:

- ``idle``: nothing else of ours runs;
- ``writeload``: a separate process writes one memory at a time into another
  orchestrator of the same root, embedding each (what a shard's worker does when
  draining write-backs), with ``--load-backend`` and ``--load-threads``.

JSON: per size and condition, per backend, ``embed_ms`` and ``recall_ms`` with p50,
p95, p99, and ``recall_over_embed`` (the p50 ratio); the first recall of a fresh
process per backend; the speed-up of the embedding (p50 old / new).

    python benchmarks/recall_latency.py                       # 1k, 10k, 100k, both conditions
    python benchmarks/recall_latency.py --sizes 1000 10000 --queries 200 --root /tmp/rl
    python benchmarks/recall_latency.py ... --no-overlap   # full text after the embedding
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _harness import emit, percentiles, temp_root

from orchmem.config import Settings, load_settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.search.vectors import product_threads
from orchmem.models.writeback.apply import write_memories

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
OLD, NEW = "sentence-transformers", "onnx"
#: The write load stops by itself after this long, whatever happens to its parent.
LOAD_MAX_S = 1800


#: Above this many memories the build draws sentences from a pool of POOL distinct ones,
#: embeds each once and gives its vector to every memory that differs from it only by
#: the "(note i)" suffix: 100k memories in minutes instead of an hour on 2 shared cores
#: (the vectors are the model's, the contents all distinct; recall embeds every query).
EMBED_EVERY_UP_TO = 20_000
POOL = 3000


def base_sentence(rng: random.Random) -> str:
    return (f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(WHEN)} "
            f"{rng.choice(WHY)}")


def sentence(rng: random.Random, i: int) -> str:
    return f"{base_sentence(rng)} (note {i})."


def memory_input(rng: random.Random, odb: Any, text: str) -> MemoryInput:
    return validate(MemoryInput, {
        "type": rng.choice(["Fact", "Preference", "Decision", "Event", "Observation"]),
        "content": text, "importance": rng.randint(10, 90),
        "confidence": round(rng.uniform(0.5, 1.0), 2),
        "source": {"sourceType": "manual", "capturedBy": "system"}}, workspace=odb.workspace)


def build(databases: Databases, orch: str, size: int, embedder: Any, seed: int) -> float:
    rng = random.Random(seed)
    odb = databases.open(orch)
    started = time.perf_counter()
    chunk = 2000
    pooled: dict[str, Any] = {}
    pool = [base_sentence(rng) for _ in range(POOL)] if size > EMBED_EVERY_UP_TO else []
    for start in range(0, size, chunk):
        bases = [base_sentence(rng) if size <= EMBED_EVERY_UP_TO else rng.choice(pool)
                 for _ in range(start, min(size, start + chunk))]
        texts = [f"{b} (note {start + j})." for j, b in enumerate(bases)]
        if size <= EMBED_EVERY_UP_TO:
            vectors = list(embedder.encode(texts))
        else:
            new = sorted({b for b in bases if b not in pooled})
            pooled.update(zip(new, embedder.encode(new), strict=True))
            vectors = [pooled[b] for b in bases]
        write_memories(odb, key=f"bench-{orch}-{start}", task="benchmark",
                       memories=[memory_input(rng, odb, t) for t in texts],
                       vectors=vectors, embedder=embedder.version)
    return time.perf_counter() - started


def ensure_built(databases: Databases, orch: str, size: int) -> float:
    if databases.open(orch).meta("bench_size") == str(size):  # type: ignore[union-attr]
        return 0.0
    build_s = build(databases, orch, size, get_embedder(databases.settings.embedding), size)
    with databases.open(orch).write():  # type: ignore[union-attr]
        from orchmem.models.storage.memories.events import set_meta
        set_meta("bench_size", str(size))
    return build_s


def write_load(root: str, backend: str, threads: int) -> None:
    """The load process: one memory per write-back, embedded, committed, no pause."""
    settings = load_settings(environ={}, root=root, broker_url="",
                             embedding={"backend": backend, "onnx_threads": threads,
                                        "torch_threads": threads})
    databases = Databases(settings)
    embedder = get_embedder(settings.embedding)
    odb = databases.open("bench-load")
    rng = random.Random(99)
    deadline = time.monotonic() + LOAD_MAX_S
    i = 0
    while time.monotonic() < deadline:
        text = sentence(rng, i)
        write_memories(odb, key=f"load-{time.time_ns()}", task="benchmark",
                       memories=[memory_input(rng, odb, text)],
                       vectors=[embedder.encode_one(text)], embedder=embedder.version)
        i += 1


@contextmanager
def load_running(root: Path, backend: str, threads: int) -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, __file__, "--load-process", str(root), backend,
                             str(threads)], stdout=subprocess.DEVNULL)
    try:
        time.sleep(8)  # model loaded, writing
        if proc.poll() is not None:
            raise RuntimeError(f"the write load exited with {proc.returncode}")
        yield
    finally:
        proc.terminate()
        proc.wait(30)


def first_recall_in_fresh_process(root: Path, orch: str, backend: str) -> float:
    code = (
        "import time; t = time.perf_counter()\n"
        "from orchmem.config import load_settings\n"
        "from orchmem.models.storage.db.database import Databases\n"
        "from orchmem.models.recall.search import recall\n"
        f"s = load_settings(environ={{}}, root={str(root)!r}, "
        f"embedding={{'backend': {backend!r}}})\n"
        f"recall({orch!r}, 'What does Alice prefer?', databases=Databases(s))\n"
        "print(time.perf_counter() - t)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def measure(clients: dict[str, Databases], orch: str, queries: list[str]) -> dict[str, Any]:
    """Per backend, the embedding alone and the whole recall of every query, alternated."""
    times: dict[str, dict[str, list[float]]] = {b: {"embed": [], "recall": []} for b in clients}
    order = list(clients)
    for warm in queries[:20]:  # model, index and statement caches hot
        for databases in clients.values():
            recall(orch, warm, databases=databases)
    for n, query in enumerate(queries):
        for backend in (order if n % 2 == 0 else order[::-1]):
            databases = clients[backend]
            embedder = get_embedder(databases.settings.embedding)
            # torch's thread count is per process: each backend runs with its own.
            product_threads(databases.settings.embedding.torch_threads)
            started = time.perf_counter()
            embedder.encode_one(query)
            middle = time.perf_counter()
            bundle = recall(orch, query, databases=databases)
            ended = time.perf_counter()
            assert bundle.nodes and bundle.vector_available, (query, bundle.warnings)
            times[backend]["embed"].append((middle - started) * 1000)
            times[backend]["recall"].append((ended - middle) * 1000)
    out = {}
    for backend, series in times.items():
        embed, whole = percentiles(series["embed"]), percentiles(series["recall"])
        out[backend] = {"embed_ms": embed, "recall_ms": whole,
                        "recall_over_embed": round(whole["p50"] / embed["p50"], 2)}
    if OLD in out and NEW in out:
        out["embed_speedup_p50"] = round(out[OLD]["embed_ms"]["p50"] /
                                         out[NEW]["embed_ms"]["p50"], 2)
    return out


def settings_for(root: Path, backend: str, args: argparse.Namespace) -> Settings:
    """The backend with the defaults of its release: the old one ran torch with one
    thread per core, the new one with ``torch_threads = 1`` (``--threads`` overrides)."""
    threads = args.threads or ((os.cpu_count() or 1) if backend == OLD else 1)
    retrieval = {name: value for name, value in (("router", args.router),
                                                  ("overlap", args.overlap)) if value is not None}
    return load_settings(environ={}, root=root, broker_url="", embedding={
        "backend": backend, "query_cache_size": 0, "onnx_threads": args.threads,
        "torch_threads": threads}, memory={"retrieval": retrieval})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--backends", nargs="+", default=[OLD, NEW])
    parser.add_argument("--conditions", nargs="+", default=["idle", "writeload"],
                        choices=["idle", "writeload"])
    parser.add_argument("--threads", type=int, default=0,
                        help="embedding threads of the recalling process (0 = default)")
    parser.add_argument("--load-backend", default=NEW)
    parser.add_argument("--load-threads", type=int, default=1)
    parser.add_argument("--no-fresh", action="store_true", help="skip the fresh-process timing")
    parser.add_argument("--router", action=argparse.BooleanOptionalAction, default=None,
                        help="memory.retrieval.router (default: the release's default)")
    parser.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=None,
                        help="memory.retrieval.overlap: full text beside the embedding "
                             "(default: the release's default)")
    parser.add_argument("--root", help="keep the databases here (default: a temp folder)")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with temp_root(args.root) as root:
        clients = {b: Databases(settings_for(root, b, args)) for b in args.backends}
        rng = random.Random(7)
        queries = [rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), t=rng.choice(THINGS))
                   for _ in range(args.queries)]
        for size in args.sizes:
            orch = f"bench-recall-{size}"
            entry: dict[str, Any] = {"memories": size,
                                     "build_s": round(ensure_built(clients[args.backends[-1]],
                                                                   orch, size), 1)}
            if not args.no_fresh:
                entry["first_recall_fresh_process_s"] = {
                    b: round(first_recall_in_fresh_process(root, orch, b), 2)
                    for b in args.backends}
            for condition in args.conditions:
                if condition == "idle":
                    entry[condition] = measure(clients, orch, queries)
                else:
                    with load_running(root, args.load_backend, args.load_threads):
                        entry[condition] = measure(clients, orch, queries)
            results[str(size)] = entry
    emit({"benchmark": "recall_latency", "queries": args.queries, "backends": args.backends,
          "threads": args.threads, "load": {"backend": args.load_backend,
                                            "threads": args.load_threads},
          "results": results})


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--load-process":
        write_load(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
