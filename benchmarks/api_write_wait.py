"""Latency of one waited write-back over HTTP: the API's write routes of a base commit
against this tree's, run alternately in one session on the same Redis and worker.

Each run is a child process serving the API (uvicorn, broker mode) with either this
tree's ``worker/api/routes.py`` or the base commit's (``git show BASE:worker/api/routes.py``
loaded in its place), and posting ``--writes`` write-backs one after another with
``wait=true`` (after ``--warm`` unmeasured ones), each to a new orchestrator per run.
Prints JSON: per run the latency p50/p95/p99 in ms; the cost of one receipt read
(``WriteHandle.done()``, what the new routes poll on the event loop): the first read
in a new thread (it opens that thread's connection) and p50/p99/max of the next ones;
and what is left unread on the process's connections to Redis (bytes in their receive
queues, and Redis's output buffers of publish/subscribe clients). The summary gives
each side's median p50 and the difference (``added_ms``).

    python benchmarks/api_write_wait.py --base main --rounds 3 --writes 200
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _harness import emit, percentiles, redis_server, settings_for, temp_root, worker_process

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def use_routes(path: Path) -> None:
    """Serve the write routes of ``path`` (an earlier ``api/routes.py``) in their place."""
    import orchmem.worker  # the parent package of the replaced module

    spec = importlib.util.spec_from_file_location("orchmem.worker.api.routes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["orchmem.worker.api.routes"] = module
    spec.loader.exec_module(module)
    assert orchmem.worker is not None


def serve(settings: Any, orchestrator_id: str) -> tuple[Any, str, str]:
    """The API in a thread of this process: (uvicorn server, base URL, token)."""
    import uvicorn

    from orchmem.models.workspace.folders import Workspace
    from orchmem.worker.api.app import create_api
    from orchmem.worker.api.server import server_config
    from orchmem.worker.api.tokens import TokenStore
    from orchmem.worker.runtime.broker import free_port

    store = TokenStore(settings)
    Workspace.for_orchestrator(settings, orchestrator_id).ensure()
    token = store.create(orchestrator_id)[0]
    port = free_port()
    server = uvicorn.Server(server_config(create_api(settings, store), settings,
                                          host="127.0.0.1", port=port, log_level="warning",
                                          lifespan="off"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return server, f"http://127.0.0.1:{port}", token


def receipt_reads(client: Any, key: str, count: int = 500) -> dict[str, Any]:
    """The cost of ``WriteHandle.done()``'s read, in ms, in a thread that never read."""
    found: dict[str, Any] = {}

    def measure() -> None:
        started = time.perf_counter()
        assert client.results.receipt_final(key)
        found["first_ms"] = round((time.perf_counter() - started) * 1000, 3)
        times = []
        for _ in range(count):
            started = time.perf_counter()
            client.results.receipt_final(key)
            times.append((time.perf_counter() - started) * 1000)
        found.update(percentiles(times, (50, 99)), max=round(max(times), 3))

    thread = threading.Thread(target=measure)
    thread.start()
    thread.join()
    return found


def unread(redis_url: str) -> dict[str, int]:
    """Bytes waiting in this process's receive queues from Redis, and Redis's output
    buffers of publish/subscribe clients (what nobody has read yet)."""
    import redis

    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    queued = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes and int(fields[2].split(":")[1], 16) == port:
            queued += int(fields[4].split(":")[1], 16)
    clients = [c for c in redis.Redis.from_url(redis_url).client_list() if "P" in c["flags"]]
    return {"receive_queue_bytes": queued, "pubsub_clients": len(clients),
            "pubsub_output_bytes": sum(int(c["tot-mem"]) for c in clients),
            "subscriptions": sum(int(c["sub"]) for c in clients)}


def child(args: argparse.Namespace) -> None:
    if args.routes:
        use_routes(Path(args.routes))
    import httpx

    settings = settings_for(Path(args.root), args.broker)
    server, url, token = serve(settings, args.orch)
    latencies = []
    key = ""
    with httpx.Client(base_url=url, timeout=120,
                      headers={"Authorization": f"Bearer {token}"}) as http:
        for n in range(args.warm + args.writes):
            body = {"memories": [{"type": "Fact", "source": MANUAL,
                                  "content": f"Benchmark fact {n} of {args.orch}"}]}
            started = time.perf_counter()
            answer = http.post(f"/v1/orchestrators/{args.orch}/writeback", json=body)
            if n >= args.warm:
                latencies.append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200, answer.text
            key = answer.json()["idempotencyKey"]
    client = server.config.app.state.orchmem.client(args.orch)
    print(json.dumps({"side": args.side, "latency_ms": percentiles(latencies),
                      "receipt_read_ms": receipt_reads(client, key),
                      "unread": unread(args.broker)}))
    server.should_exit = True


def run_side(args: argparse.Namespace, root: Path, broker: str, side: str, round_: int,
             routes: Path) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", "--side", side, "--root", str(root),
               "--broker", broker, "--orch", f"bench-{side}-{round_}",
               "--writes", str(args.writes), "--warm", str(args.warm)]
    if side == "before":
        command += ["--routes", str(routes)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{side} run failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {"round": round_, **result}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    medians = {side: statistics.median(r["latency_ms"]["p50"] for r in runs
                                       if r["side"] == side) for side in ("before", "after")}
    return {"median_p50_ms": medians,
            "added_ms": round(medians["after"] - medians["before"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="The commit whose routes are 'before'.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--root", help="Work folder (default: a temporary one).")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--broker", help=argparse.SUPPRESS)
    parser.add_argument("--orch", help=argparse.SUPPRESS)
    parser.add_argument("--routes", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    old = subprocess.run(["git", "show", f"{args.base}:worker/api/routes.py"],
                         capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    with temp_root(args.root) as root, redis_server(root / "redis") as broker, \
            tempfile.TemporaryDirectory() as tmp:
        routes = Path(tmp) / "api/routes.py"
        routes.write_text(old)
        settings = settings_for(root, broker)
        runs = []
        with worker_process(settings):
            for round_ in range(args.rounds):
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                runs += [run_side(args, root, broker, side, round_, routes) for side in order]
        emit({"benchmark": "api_write_wait", "base": args.base, "writes": args.writes,
              "load_average": os.getloadavg()[0], "runs": runs, "summary": summary(runs)})


if __name__ == "__main__":
    main()
