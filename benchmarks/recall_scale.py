"""Recall at scale: an orchestrator of N memories, searched through the approximate index
file (models/storage/search/ann.py) above ``retrieval.ann_threshold`` and exactly below.

The build writes the rows and vectors through the storage layer (``insert_memory``,
``store_embeddings``: one transaction per chunk, no reconciliation, no model for
``--synthetic``), then makes the index file (``ann.sync``). With ``--synthetic`` the
vectors are random unit vectors (the latency figure); without, each memory's distinct
sentence is embedded by MiniLM (the agreement figure: minutes at 100k on 2 cores).

Then, for every query, ``embedder.encode_one`` and ``recall()`` are timed (the query
vector cache is off: every recall runs the model), and the vector stage's top 10 from
the index is compared with exact search's (``agreement_at_10``: the share of exact
search's top 10 that the index returns, averaged over the queries). ``--exact`` also
times recall with the threshold at 0 (exact search), alternating with the index query
by query.

JSON: memories, index ("usearch" | "exact"), rows_s (the build of the rows), build_s (the
index file), file_mb, recall_ms {p50, p95}, embed_ms {p50, p95}, agreement_at_10,
exact_recall_ms (with ``--exact``), rss_mb (this process's resident memory after the
queries; the exact matrix of ``--exact`` and the agreement is counted in it).

    python benchmarks/recall_scale.py --memories 1000000 --synthetic --queries 100
    python benchmarks/recall_scale.py --memories 100000 --queries 200 --exact
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
from _harness import emit, percentiles, temp_root
from recall_latency import QUESTIONS, THINGS, base_sentence

from orchmem.config import load_settings
from orchmem.models.core.shapes import MemoryInput, derive_id, validate
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.search import ann, vectors

ORCH = "scale"
CHUNK = 20_000


def texts(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{base_sentence(rng)} (note {i})." for i in range(size)]


def write_rows(odb: OrchestratorDB, contents: list[str], matrix: Any, version: str) -> float:
    """Rows and vectors, a transaction per CHUNK, through the storage layer."""
    template = validate(MemoryInput, {"type": "Fact", "content": "x",
                                      "source": {"sourceType": "manual",
                                                 "capturedBy": "system"}},
                        workspace=odb.workspace)
    started = time.perf_counter()
    # Chunks commit whole and are the same on every run: a kept --root resumes.
    done = int(odb.sql("SELECT count(*) FROM memory_embeddings")[0][0])
    for start in range(done - done % CHUNK, len(contents), CHUNK):
        ids = [derive_id("m", ORCH, "scale", start + j)
               for j in range(min(CHUNK, len(contents) - start))]
        with odb.write(durable=False):
            for j, memory_id in enumerate(ids):
                memory = template.model_copy(update={"content": contents[start + j]})
                memories.insert_memory(memory_id, memory, key=f"scale-{start + j}")
            vectors.store_embeddings(zip(ids, matrix(start, len(ids)), strict=True), version)
    return time.perf_counter() - started


def synthetic(dim: int, seed: int) -> Any:
    def rows(start: int, count: int) -> np.ndarray:
        block = np.random.default_rng(seed + start).standard_normal((count, dim))
        return (block / np.linalg.norm(block, axis=1, keepdims=True)).astype(np.float32)
    return rows


def embedded(embedder: Any, contents: list[str]) -> Any:
    def rows(start: int, count: int) -> np.ndarray:
        return np.asarray(embedder.encode(contents[start:start + count]), dtype=np.float32)
    return rows


def agreement(odb: OrchestratorDB, queries: list[np.ndarray], version: str) -> float:
    """Of exact search's top 10 per query, the share the index's top 10 holds."""
    dim = int(queries[0].shape[0])
    shares = []
    for query in queries:
        with odb.read():
            held = ann.reader(odb, version, dim)
            assert held is not None, "no usable index file"
            found = {h.memory_id for h in vectors.search(odb, query, embedder=version,
                                                         limit=10, index=held)[0]}
            exact = vectors.search(odb, query, embedder=version, limit=10,
                                   index=vectors.index_for(odb, version, dim))[0]
        shares.append(len(found & {h.memory_id for h in exact}) / max(len(exact), 1))
    odb.cache.pop("vector_index", None)  # the exact matrix out of this process again
    return round(float(np.mean(shares)), 4)


def rss_mb() -> int:
    """This process's resident memory now (the mapped file's pages included)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return -1


def set_threshold(odb: OrchestratorDB, value: int) -> None:
    odb.memory = odb.memory.model_copy(update={"retrieval": odb.memory.retrieval.model_copy(
        update={"ann_threshold": value})})


def run(args: argparse.Namespace) -> dict[str, Any]:
    with temp_root(args.root) as root:
        settings = load_settings(environ={}, root=root, broker_url="",
                                 embedding={"query_cache_size": 0},
                                 memory={"retrieval": {"ann_threshold": args.threshold}})
        databases = Databases(settings)
        odb = databases.open(ORCH)
        assert odb is not None
        embedder = get_embedder(settings.embedding)
        contents = texts(args.memories, args.seed)
        rows = synthetic(embedder.dim, args.seed) if args.synthetic else embedded(embedder,
                                                                                   contents)
        resumed = int(odb.sql("SELECT count(*) FROM memory_embeddings")[0][0])
        rows_s = write_rows(odb, contents, rows, embedder.version)
        started = time.perf_counter()
        done = ann.sync(odb, embedder.version, embedder.dim)
        build_s = time.perf_counter() - started
        odb.cache.pop("ann_writer", None)  # what a reading process holds: the mapping only
        rng = random.Random(args.seed + 1)
        asked = [rng.choice(QUESTIONS).format(p=base_sentence(rng).split()[0],
                                              t=rng.choice(THINGS))
                 for _ in range(args.queries)]
        embed_ms, recall_ms, exact_ms = [], [], []
        for i, question in enumerate(asked):
            for exact in ((False, True) if i % 2 else (True, False)) if args.exact else (False,):
                set_threshold(odb, 0 if exact else args.threshold)
                t0 = time.perf_counter()
                bundle = recall(ORCH, question, databases=databases)
                (exact_ms if exact else recall_ms).append((time.perf_counter() - t0) * 1000)
                assert exact or bundle.candidates.get("approximate") == (done != "below")
            t0 = time.perf_counter()
            embedder.encode_one(question)
            embed_ms.append((time.perf_counter() - t0) * 1000)
        set_threshold(odb, args.threshold)
        report: dict[str, Any] = {
            "memories": args.memories, "synthetic": args.synthetic,
            "index": "usearch" if done != "below" else "exact",
            "rows_s": round(rows_s, 1), "rows_resumed_from": resumed,
            "build_s": round(build_s, 1),
            "file_mb": round(ann.paths(odb.workspace)[0].stat().st_size / 2**20, 1)
            if done != "below" else 0,
            "recall_ms": percentiles(recall_ms, (50, 95)),
            "embed_ms": percentiles(embed_ms, (50, 95)),
            "rss_mb": rss_mb(),
        }
        if args.exact:
            report["exact_recall_ms"] = percentiles(exact_ms, (50, 95))
        if not args.synthetic and done != "below":
            report["agreement_at_10"] = agreement(
                odb, [embedder.encode_one(q) for q in asked], embedder.version)
        databases.close_all()
        return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--synthetic", action="store_true",
                        help="random unit vectors instead of MiniLM's (no agreement figure)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--threshold", type=int, default=50_000,
                        help="memory.retrieval.ann_threshold for the run")
    parser.add_argument("--exact", action="store_true",
                        help="also time exact search (threshold 0), alternating")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--root", help="keep the orchestrator here (default: a temp folder)")
    emit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
