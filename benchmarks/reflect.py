"""Reflection time per 1,000 memories, on LoCoMo dialogue turns.

Stores the turns of the LoCoMo conversations (as benchmarks/locomo.py does) in one
orchestrator until it holds ``--size`` memories, then runs ``models.reflect.reflect`` in
process three times: the first run (every topic, proposal and crystal is new), a run
with nothing changed, and a run after 10 more memories. Prints JSON with each run's
seconds (total and per stage), its counts, and the first run's seconds per 1,000.

    python benchmarks/reflect.py [--size 1000 3000]

``crystallize_conversation`` is what ``benchmarks/locomo.py --crystals`` uses: one
reflection of a conversation's orchestrator, and the dia_ids each crystal quotes.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from _harness import emit, temp_root
from locomo import DEFAULT_DATA, load_conversation

from orchmem.config import load_settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.reflection.stages import reflect
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.writeback.apply import write_memories


def crystallize_conversation(odb: OrchestratorDB, embedder: Any,
                             mapping: dict[str, set[str]]) -> dict[str, set[str]]:
    """Reflect once; returns crystal memoryId -> the dia_ids of the turns it quotes (a
    turn is quoted when its words appear in the crystal's content)."""
    reflect(odb, embedder, key="bench-reflect")
    texts = dict(odb.sql("SELECT memory_id, content FROM memories"))
    found: dict[str, set[str]] = {}
    for crystal, units in _parts(odb).items():
        content = " ".join(texts[crystal].split())
        found[crystal] = {d for u in units if " ".join(texts[u].split()).rstrip(".") in content
                          for d in mapping.get(u, set())}
    return found


def _parts(odb: OrchestratorDB) -> dict[str, list[str]]:
    parts: dict[str, list[str]] = {}
    for unit, crystal in odb.sql("SELECT e.from_memory_id, e.to_memory_id FROM memory_edges e "
                                 "JOIN crystals c ON c.memory_id = e.to_memory_id "
                                 "WHERE e.edge_type = 'PartOf'"):
        parts.setdefault(crystal, []).append(unit)
    return parts


def _fill(odb: OrchestratorDB, data: list[dict[str, Any]], embedder: Any, size: int) -> int:
    for sample in data:
        if _count(odb) >= size:
            break
        load_conversation(odb, sample, embedder)
    return _count(odb)


def _count(odb: OrchestratorDB) -> int:
    return int(odb.sql("SELECT count(*) FROM memories WHERE status = 'active'")[0][0])


def _more(odb: OrchestratorDB, embedder: Any) -> None:
    texts = [f"Caroline: I started a new pottery class number {i} this week" for i in range(10)]
    memories = [validate(MemoryInput, {"type": "Observation", "content": t, "source": {
        "sourceType": "manual", "capturedBy": "system"}}) for t in texts]
    write_memories(odb, key="bench-more", task="benchmark", memories=memories,
                   vectors=list(embedder.encode(texts)), embedder=embedder.version)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--size", type=int, nargs="+", default=[1000])
    args = parser.parse_args()
    data = json.loads(Path(args.data).read_text())
    results = {}
    with temp_root(None) as root:
        settings = load_settings(environ={}, root=root, broker_url="")
        databases = Databases(settings)
        embedder = get_embedder(settings.embedding)
        for size in args.size:
            odb = databases.open(f"bench-reflect-{size}")
            assert odb is not None
            held = _fill(odb, data, embedder, size)
            runs = {}
            for name in ("first", "unchanged", "after_10_more"):
                if name == "after_10_more":
                    _more(odb, embedder)
                started = time.perf_counter()
                counts = reflect(odb, embedder, key=f"bench-{name}")
                runs[name] = {**counts, "totalSeconds": round(time.perf_counter() - started, 3)}
            results[str(size)] = {"memories": held, "runs": runs,
                                  "first_seconds_per_1000": round(
                                      runs["first"]["totalSeconds"] * 1000 / held, 3)}
    emit({"benchmark": "reflect", "results": results})


if __name__ == "__main__":
    main()
