"""Export, import, rebuild, backup, restore and the v1 -> v2 migration, timed at one size.

One orchestrator gets N memories (distinct sentences, with vectors), each with a source
and an audit event, and one edge per ten memories. Printed as JSON (seconds):

- export (jsonl), export (md), import into a fresh root (total, embedding, and the one
  write transaction: how long the shard's worker may wait on the lock), rebuild fts,
  rebuild vectors, backup, restore, and a writer's open of the same file as schema 1
  (backup + migration + check).

    python benchmarks/portability.py                 # 5,000 memories
    python benchmarks/portability.py --memories 20000
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from _harness import emit, temp_root

from orchmem.config import load_settings
from orchmem.models.core.shapes import EdgeInput, MemoryInput, validate
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.portability.export import export_jsonl, export_markdown
from orchmem.models.portability.importer import import_folder
from orchmem.models.portability.rebuild import rebuild_vectors
from orchmem.models.storage.db.backup import restore_backup, take_backup
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.derived import rebuild_fts
from orchmem.models.writeback.apply import write_memories

ORCH = "bench-portable"
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray").split()


def sentences(n: int) -> list[str]:
    rng = random.Random(7)
    return [f"Item {i}: " + " ".join(rng.choice(WORDS) for _ in range(12)) for i in range(n)]


def fill(odb: Any, embedder: Any, n: int) -> None:
    texts = sentences(n)
    for start in range(0, n, 500):
        chunk = texts[start:start + 500]
        memories = [validate(MemoryInput, {"type": "Fact", "content": t, "key": f"k{j}",
                                           "source": {"sourceType": "manual",
                                                      "capturedBy": "user"}})
                    for j, t in enumerate(chunk)]
        edges = [validate(EdgeInput, {"fromMemoryId": f"k{j}", "toMemoryId": f"k{j + 1}",
                                      "edgeType": "RelatedTo"})
                 for j in range(0, len(chunk) - 1, 10)]
        write_memories(odb, key=f"fill-{start}", task="bench", memories=memories, edges=edges,
                       vectors=list(embedder.encode(chunk)), embedder=embedder.version)


def timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return round(time.perf_counter() - started, 3), value


def run(root: Path, n: int) -> dict[str, Any]:
    settings = load_settings(environ={}, root=root / "a", broker_url="")
    embedder = get_embedder(settings.embedding)
    odb = Databases(settings).open(ORCH)
    fill(odb, embedder, n)
    out: dict[str, Any] = {"memories": n, "embedder": embedder.version}
    out["export_jsonl_s"], _ = timed(lambda: export_jsonl(odb, root / "export"))
    out["export_md_s"], _ = timed(lambda: export_markdown(odb, root / "md"))
    target = Databases(load_settings(environ={}, root=root / "b", broker_url="")).open(ORCH)
    out["import_s"], report = timed(lambda: import_folder(
        target, root / "export", embedder=embedder, batch_size=settings.embedding.batch_size))
    out["import_embed_s"], out["import_write_lock_s"] = (report["embedSeconds"],
                                                         report["writeSeconds"])
    out["rebuild_fts_s"], _ = timed(lambda: rebuild_fts(odb))
    out["rebuild_vectors_s"], _ = timed(lambda: rebuild_vectors(
        odb, embedder, settings.embedding.batch_size))
    out["backup_s"], backup = timed(lambda: take_backup(odb, "manual"))
    out["backup_bytes"] = backup.stat().st_size
    out["restore_s"], _ = timed(lambda: restore_backup(odb.workspace, backup, 10_000))
    odb.close()
    with sqlite3.connect(odb.workspace.db_path) as conn:
        conn.execute("DROP TABLE memory_event_ids")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    out["open_and_migrate_v1_s"], _ = timed(lambda: Databases(settings).open(ORCH))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--root", help="Keep the data here (default: a temporary folder).")
    args = parser.parse_args()
    with temp_root(args.root) as root:
        emit(run(root, args.memories))


if __name__ == "__main__":
    main()
