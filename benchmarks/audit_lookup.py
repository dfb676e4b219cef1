"""The audit lookups of one memory, before and after ``memory_event_ids`` (schema 2).

Builds an orchestrator whose audit log holds N events (N/2 filler memories, each
created and reinforced), plus one memory created in one conversation and reinforced
from another. Then times, in a warm process, for that memory:

- ``history(odb, memory_id)``: the node, its events, edges and sources;
- ``said_before(stored, memory)``: the repeat check of write-back, on the path that
  reads the memory's reinforce events (the same words again from the second place).

"after" runs on the schema-2 file. "before" runs the same functions on a copy turned
back into the schema-1 file the previous release wrote (the table dropped, the version
set to 1) and opened by a reader, which does not migrate: there the lookups run the
previous release's query, a LIKE scan of every event's JSON list of ids.

    python benchmarks/audit_lookup.py [--sizes 10000 100000] [--repeat 200]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from _harness import emit, percentiles, settings_for, temp_root

from orchmem.models.core.shapes import MemoryInput, derive_id, validate
from orchmem.models.governance.history import history
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.memories import events
from orchmem.models.storage.memories import rows as memories
from orchmem.models.writeback.apply import write_memories

ORCH = "bench-audit"
CONTENT = "The office is in Porto"


def said(conversation: str, content: str) -> MemoryInput:
    return validate(MemoryInput, {"type": "Fact", "content": content, "source": {
        "sourceType": "channel_transcript", "capturedBy": "extractor",
        "conversationId": conversation}})


def build(odb: OrchestratorDB, n_events: int) -> str:
    """Fill the audit log with ``n_events`` events; returns the measured memory's id."""
    target = write_memories(odb, key="t1", task="t", memories=[said("conv-a", CONTENT)])
    write_memories(odb, key="t2", task="t", memories=[said("conv-b", CONTENT)])
    for start in range(0, n_events // 2, 5000):
        with odb.write():
            for i in range(start, min(start + 5000, n_events // 2)):
                memory_id = derive_id("m", ORCH, "filler", i)
                memories.insert_memory(memory_id, said(f"conv-{i}", f"filler note {i}"),
                                       key=f"f{i}")
                events.add_event("create", [memory_id], key=f"f{i}")
                events.add_event("reinforce", [memory_id], after={"confidence": 0.9},
                                 key=f"r{i}")
    return str(target["created"][0])


def as_schema_1(path: Path) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP TABLE memory_event_ids")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.execute("VACUUM")
    conn.close()


def timed(call: Callable[[], object], repeat: int) -> dict[str, float]:
    call()  # warm the page cache
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        timings.append((time.perf_counter() - started) * 1000)
    return percentiles(timings, (50, 95))


def measure(odb: OrchestratorDB, memory_id: str, repeat: int) -> dict[str, object]:
    with odb.read():
        stored = memories.get(memory_id)
    assert stored is not None
    again = said("conv-b", CONTENT)

    def repeat_check() -> None:
        with odb.read():
            assert memories.said_before(stored, again)

    return {"schema": odb.meta("schema_version"),
            "history_ms": timed(lambda: history(odb, memory_id), repeat),
            "said_before_ms": timed(repeat_check, repeat)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--root", help="keep the data here (default: a temp folder)")
    args = parser.parse_args()
    results = {}
    with temp_root(args.root) as root:
        for size in args.sizes:
            after_settings = settings_for(root / f"after-{size}", "")
            before_settings = settings_for(root / f"before-{size}", "")
            writer = Databases(after_settings)
            odb = writer.open(ORCH)
            assert odb is not None
            started = time.perf_counter()
            memory_id = build(odb, size)
            built_s = time.perf_counter() - started
            writer.close_all()
            shutil.copytree(after_settings.root / "orchestrators",
                            before_settings.root / "orchestrators")
            as_schema_1(Databases(before_settings).workspace(ORCH).db_path)
            before = Databases(before_settings, readonly=True).open(ORCH)
            after = Databases(after_settings).open(ORCH)
            assert before is not None and after is not None
            results[str(size)] = {"events": size, "build_s": round(built_s, 1),
                                  "before": measure(before, memory_id, args.repeat),
                                  "after": measure(after, memory_id, args.repeat)}
    emit({"benchmark": "audit_lookup", "repeat": args.repeat, "results": results})


if __name__ == "__main__":
    main()
