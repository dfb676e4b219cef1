"""What telemetry costs: recall and write-back latency of a base commit's tree against
this tree's with telemetry off, and this tree's with it on, run alternately in one
session on the same memory.

Each run is a child process (immediate mode: no broker, the task runs in the caller)
importing orchmem from one tree: the base commit's is extracted with ``git archive``
and put first on ``PYTHONPATH`` (as ``orchmem.*``, like typecheck/orchmem). A child
writes ``--writes`` write-backs one by one (each timed: a whole task, publish to
commit, in process), then recalls ``--recalls`` questions (after ``--warm``
unmeasured ones) against a memory of ``--memories`` memories built once before the
rounds. With telemetry on, spans go to a local OTLP/HTTP sink that answers every
export with 200. Prints JSON: per run the p50/p95 in ms; per side the median of the
rounds' p50s, and the differences; and the cost of one no-op span block and of the
headers call with telemetry off, in ns (``facade_off_ns``).

    python benchmarks/telemetry_overhead.py --base main --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _harness import emit, temp_root

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("config", "models", "tasks", "worker", "examples")

CHILD = r'''
import json, sys, time
import numpy as np
from orchmem.config import load_settings
from orchmem.worker import MemoryClient

root, telemetry, writes, recalls, warm = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
# The base tree may have no [telemetry] table: off is its default, not an override.
on = {"telemetry": {"enabled": True}} if telemetry == "on" else {}
settings = load_settings(environ={}, root=root, **on)
client = MemoryClient("bench", settings, immediate=True)
stamp = time.time_ns()
write_ms = []
for i in range(writes):
    text = f"Run {stamp} note {i}: the parcel for desk {i % 37} goes to floor {i % 11}"
    started = time.perf_counter()
    result = client.write_back(memories=[{"type": "Fact", "content": text}]).wait(60)
    write_ms.append((time.perf_counter() - started) * 1000)
    assert result is not None and result["ok"], result
questions = [f"where does the parcel for desk {i % 37} go" for i in range(recalls + warm)]
recall_ms = []
for i, question in enumerate(questions):
    started = time.perf_counter()
    client.recall(question, wait_for_writes=False)
    if i >= warm:
        recall_ms.append((time.perf_counter() - started) * 1000)
loaded = any(m.startswith("opentelemetry.sdk") for m in sys.modules)
def pct(values, p):
    return round(float(np.percentile(values, p)), 3)
print(json.dumps({"recall_p50": pct(recall_ms, 50), "recall_p95": pct(recall_ms, 95),
                  "write_p50": pct(write_ms, 50), "write_p95": pct(write_ms, 95),
                  "sdk_loaded": loaded, "source": sys.modules["orchmem.models"].__file__}))
'''

SEED = r'''
import sys
from orchmem.config import load_settings
from orchmem.worker import MemoryClient
settings = load_settings(environ={}, root=sys.argv[1])
client = MemoryClient("bench", settings, immediate=True)
n = int(sys.argv[2])
for start in range(0, n, 50):
    memories = [{"type": "Fact", "content": f"Seed {i}: item {i} is kept in box {i * 7 % 101}"}
                for i in range(start, min(n, start + 50))]
    assert client.write_back(memories=memories).wait(120)["ok"]
'''


def base_tree(base: str, into: Path) -> Path:
    """The base commit's sources as an ``orchmem`` package folder; returns PYTHONPATH."""
    archive = subprocess.run(["git", "archive", base, *LAYERS], cwd=REPO, check=True,
                             capture_output=True).stdout
    source = into / "src"
    source.mkdir()
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    package = into / "path" / "orchmem"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for layer in LAYERS:
        (package / layer).symlink_to(source / layer)
    return into / "path"


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


def run(path: Path | None, root: Path, telemetry: str, args: argparse.Namespace,
        endpoint: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHMEM_", "OTEL_"))}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    if telemetry == "on":
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    out = subprocess.run([sys.executable, "-c", CHILD, str(root), telemetry, str(args.writes),
                          str(args.recalls), str(args.warm)], env=env, capture_output=True,
                         text=True, cwd=tempfile.gettempdir())
    if out.returncode != 0:
        raise RuntimeError(f"run failed: {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def facade_off_ns(calls: int = 200_000) -> dict[str, float]:
    """What one span costs while telemetry is off (this process never turns it on): a
    ``with spans.span(...)`` block with attributes, and the message headers."""
    import timeit

    from orchmem.models.telemetry import spans

    def block() -> None:
        with spans.span("orchmem.recall.fusion", {"orchmem.count": 1}) as traced:
            traced.set("orchmem.count", 2)

    span_s = min(timeit.repeat(block, number=calls, repeat=5)) / calls
    headers_s = min(timeit.repeat(spans.headers, number=calls, repeat=5)) / calls
    return {"span_block": round(span_s * 1e9, 1), "headers": round(headers_s * 1e9, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--root")
    args = parser.parse_args()
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{sink.server_address[1]}"
    with temp_root(args.root) as root, tempfile.TemporaryDirectory() as tmp:
        base_path = base_tree(args.base, Path(tmp))
        subprocess.run([sys.executable, "-c", SEED, str(root), str(args.memories)], check=True,
                       env={k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")})
        sides: dict[str, list[dict[str, Any]]] = {"base_off": [], "tree_off": [], "tree_on": []}
        for _ in range(args.rounds):
            sides["base_off"].append(run(base_path, root, "off", args, endpoint))
            sides["tree_off"].append(run(None, root, "off", args, endpoint))
            sides["tree_on"].append(run(None, root, "on", args, endpoint))
    sink.shutdown()
    facade = facade_off_ns()
    summary = {side: {metric: round(statistics.median(r[metric] for r in runs), 3)
                      for metric in ("recall_p50", "write_p50")} for side, runs in sides.items()}
    emit({"base": args.base, "memories": args.memories, "load_average": os.getloadavg(),
          "facade_off_ns": facade, "runs": sides, "median_p50": summary,
          "off_vs_base_ms": {m: round(summary["tree_off"][m] - summary["base_off"][m], 3)
                             for m in ("recall_p50", "write_p50")},
          "on_vs_off_ms": {m: round(summary["tree_on"][m] - summary["tree_off"][m], 3)
                           for m in ("recall_p50", "write_p50")}})


if __name__ == "__main__":
    main()
