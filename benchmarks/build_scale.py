"""A large orchestrator built from an export: a synthetic export with vectors, imported.

Embedding 100,000 texts takes the model many minutes on a small machine, so the export
is written here directly, in the format ``orchmem export --vectors`` writes (the files,
their sorted lines, the manifest with counts and sha256): N distinct sentences, each
memory with a source and a ``create`` audit event, an edge per ten memories, and a
random unit vector per memory labelled with the configured embedder's version (so the
import reuses it and never loads the model). The vectors are fine for timing and for
sizes, not for recall quality.

The export is kept under ``--root`` (built once per N); each run imports it into a
fresh root with ``orchmem import`` in a subprocess (process start included) and prints
JSON: the time to write the export, each import's wall time and memories per second,
the import's own report and the size of the resulting memory.db.

    python benchmarks/build_scale.py --memories 100000 --root /tmp/scale --runs 1
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _harness import emit
from import_speed import import_once

from orchmem.config import load_settings
from orchmem.models.core.shapes import format_ts, orchestrator_tag, utc_now
from orchmem.models.embedding.embedders import predicted_version
from orchmem.models.portability.export import FILES, MANIFEST, dumps_line, toml_text
from orchmem.models.portability.export_vectors import VECTORS
from orchmem.models.storage.memories.portable import INDEX_VERSION, SCHEMA_VERSION

ORCH = "bench-portable"
DIM = 384
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray").split()


def _record(memory_id: str, text: str, at: str) -> dict[str, Any]:
    return {"capturedBy": "user", "confidence": 0.8, "content": text,
            "conversationId": None, "createdAt": at,
            "fingerprint": hashlib.blake2b(text.encode(), digest_size=16).hexdigest(),
            "forgotten": 0,
            "importance": 50, "memoryId": memory_id, "metadata": {}, "projectId": None,
            "reinforcements": 0, "scope": "global", "sensitivity": "internal",
            "sessionId": None, "sourcePath": None, "sourceType": "manual", "stated": 1,
            "status": "active", "stepId": None, "subject": None, "summary": text,
            "tags": [], "tier": "semantic", "timeRefs": None, "type": "Fact",
            "updatedAt": at, "validFrom": None, "validTo": None, "value": None,
            "workflowRunId": None}


def _write(path: Path, lines: list[str]) -> str:
    data = "".join(lines).encode("utf-8")
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def write_export(folder: Path, n: int, embedder: str) -> None:
    """The export's files for N memories (see the module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    tag, rng = orchestrator_tag(ORCH), random.Random(7)
    at = format_ts(utc_now())
    ids = [f"m-{tag}-{i:016x}" for i in range(n)]
    texts = [f"Item {i}: " + " ".join(rng.choice(WORDS) for _ in range(12)) for i in range(n)]
    lines = {
        "records": [dumps_line(_record(m, t, at)) for m, t in zip(ids, texts, strict=True)],
        "sources": [dumps_line({"capturedAt": at, "capturedBy": "user", "conversationId": None,
                                "memoryId": m, "sourcePath": None, "sourceType": "manual",
                                "stepId": None, "taskKey": "build", "workflowRunId": None})
                    for m in ids],
        "edges": [dumps_line({"createdAt": at, "edgeId": f"e-{tag}-{i:016x}",
                              "edgeType": "RelatedTo", "fromMemoryId": ids[i],
                              "reason": None, "toMemoryId": ids[i + 1], "weight": 1.0})
                  for i in range(0, n - 1, 10)],
        "audit": [dumps_line({"actor": "user", "after": {"confidence": 0.8, "importance": 50,
                                                         "subject": None, "type": "Fact"},
                              "at": at, "before": None, "eventId": i + 1,
                              "idempotencyKey": "build", "memoryIds": [m], "op": "create",
                              "reason": None}) for i, m in enumerate(ids)],
    }
    counts = {kind: len(rows) for kind, rows in lines.items()}
    hashes = {FILES[kind]: _write(folder / FILES[kind], rows) for kind, rows in lines.items()}
    matrix = np.random.default_rng(7).standard_normal((n, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    hashes[VECTORS] = _write(folder / VECTORS, [dumps_line({
        "dim": DIM, "embedder": embedder, "memoryId": m,
        "vector": base64.b64encode(matrix[i].astype("<f4").tobytes()).decode("ascii")})
        for i, m in enumerate(ids)])
    counts["vectors"] = n
    manifest = {"format": "orchmem-export", "format_version": 1, "orchestratorId": ORCH,
                "schema_version": SCHEMA_VERSION, "last_migrated_at": "",
                "embedder_version": embedder, "index_version": INDEX_VERSION,
                "exported_at": at, "include_restricted": False, "restricted_left_out": 0,
                "crystals_left_out": 0, "counts": counts, "sha256": hashes}
    (folder / MANIFEST).write_text(toml_text(manifest), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--root", required=True, help="Keeps the export between runs.")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    settings = load_settings(environ={}, root=Path(args.root) / "settings", broker_url="")
    embedder = predicted_version(settings.embedding, DIM)
    if embedder is None:
        sys.exit("the configured embedder is a plug-in: its version is not known ahead")
    root = Path(args.root) / f"synthetic-{args.memories}"
    folder = root / "export"
    started = time.perf_counter()
    if not (folder / MANIFEST).exists():
        shutil.rmtree(folder, ignore_errors=True)
        write_export(folder, args.memories, embedder)
    export_s = round(time.perf_counter() - started, 3)
    walls, cpus, report = [], [], {}
    for _ in range(args.runs):
        wall, report = import_once(folder, root / "target", ORCH)
        walls.append(round(wall, 3))
        cpus.append(report["cpu_s"])
    db = next((root / "target").rglob("memory.db"))
    emit({"memories": args.memories, "export_write_s": export_s, "import_wall_s": walls,
          "per_s": [round(args.memories / w) for w in walls], "import_cpu_s": cpus,
          "per_cpu_s": [round(args.memories / c) for c in cpus],
          "report": {k: report.get(k) for k in ("seconds", "embedSeconds", "writeSeconds",
                                                "vectorsFromFile")},
          "written": report.get("written"),
          "memory_db_mb": round(db.stat().st_size / 2**20, 1),
          "python": sys.executable, "argv": json.dumps(sys.argv[1:])})


if __name__ == "__main__":
    main()
