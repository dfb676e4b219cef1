"""`orchmem import` of an export, as an operator runs it: a fresh process, timed whole.

The export (N distinct memories with vectors, a source and an audit event each, an
edge per ten; ``export --vectors``) is built once under ``--root`` and kept, so that
two releases can import the same folder in turn: run this file with each release's
interpreter, alternating. Each run imports into a fresh root, in a subprocess
(``python -m orchmem.worker import``; process start and model load included), and
prints JSON: the wall time per run and memories per second, the process's CPU time
(user + system; steadier than the wall on a shared machine) and memories per CPU
second, plus the import's own report (``seconds``, ``embedSeconds``,
``writeSeconds``) of the last run.

    python benchmarks/import_speed.py --memories 10000 --root /tmp/imp --runs 3
    python benchmarks/import_speed.py --memories 10000 --root /tmp/imp --no-vectors
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _harness import emit
from portability import ORCH, fill

from orchmem.config import load_settings
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.portability.export import export_jsonl
from orchmem.models.storage.db.database import Databases


def build(folder: Path, n: int) -> None:
    """The export with vectors, made once (embedding N texts takes a while)."""
    if (folder / "manifest.toml").exists():
        return
    source = folder.parent / "source"
    shutil.rmtree(source, ignore_errors=True)
    settings = load_settings(environ={}, root=source, broker_url="")
    odb = Databases(settings).open(ORCH)
    assert odb is not None
    fill(odb, get_embedder(settings.embedding), n)
    export_jsonl(odb, folder, include_vectors=True)
    odb.close()


def without_vectors(folder: Path) -> Path:
    """The same export without ``vectors.jsonl`` (so every memory is embedded)."""
    bare = folder.parent / "export-bare"
    if not bare.exists():
        shutil.copytree(folder, bare)
        (bare / "vectors.jsonl").unlink(missing_ok=True)
        manifest = bare / "manifest.toml"
        manifest.write_text("\n".join(line for line in manifest.read_text().splitlines()
                                      if "vectors.jsonl" not in line) + "\n")
    return bare


def import_once(folder: Path, target: Path, orch: str = ORCH) -> tuple[float, dict[str, Any]]:
    shutil.rmtree(target, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "orchmem.worker", "--root", str(target),
                           "import", "--orch", orch, str(folder), "--json"],
                          env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"import failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = done.stdout
    report = json.loads(text[text.find("{"):])
    # The process's own CPU time (user + system): steadier than the wall on a shared machine.
    report["cpu_s"] = round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 3)
    return wall, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--root", required=True, help="Keeps the export between runs.")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--no-vectors", action="store_true",
                        help="Import the export without its vectors (all embedded).")
    args = parser.parse_args()
    root = Path(args.root) / str(args.memories)
    folder = root / "export"
    build(folder, args.memories)
    if args.no_vectors:
        folder = without_vectors(folder)
    walls, cpus, report = [], [], {}
    for _ in range(args.runs):
        wall, report = import_once(folder, root / "target")
        walls.append(round(wall, 3))
        cpus.append(report["cpu_s"])
    emit({"memories": args.memories, "vectors": not args.no_vectors, "wall_s": walls,
          "per_s": [round(args.memories / w) for w in walls], "cpu_s": cpus,
          "per_cpu_s": [round(args.memories / c) for c in cpus],
          "report": {k: report.get(k) for k in ("seconds", "embedSeconds", "writeSeconds",
                                                "vectorsFromFile")},
          "python": sys.executable})


if __name__ == "__main__":
    main()
