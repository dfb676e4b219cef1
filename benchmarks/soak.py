"""Soak: minutes of mixed load on 10 orchestrators, then a count of what was stored.

Starts a private Redis (AOF on) and one worker per shard (2, as ``orchmem up`` runs
them; ``--workers 1``: one worker consuming both shards), then runs for ``--minutes``:
orchestrator threads that each, per "message", write a transcript back,
get the bulletin, recall, and now and then write a workflow output or drop an ingest
file. Prints JSON: operations and their latency percentiles, worker RSS at the start
and the end, and the final check: every accepted write stored exactly once.

    python benchmarks/soak.py --minutes 10
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import threading
import time
from contextlib import ExitStack

from _harness import emit, percentiles, redis_server, settings_for, temp_root, worker_process
from _procs import cpu_now, redis_pids, rss_mb, wait_now, worker_pids
from _timeline import BulletinTrace, Timeline, memory_logs

from orchmem.config import Settings
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import create_app

WORDS = ("amber basil cedar delta ember fjord garnet harbor indigo juniper kettle lantern "
         "meadow nectar orchid pepper quartz raven saffron tundra umber velvet willow").split()


def with_onnx_threads(settings: Settings, threads: int | None) -> Settings:
    """``settings`` with ``embedding.onnx_threads = threads`` (unchanged when None)."""
    if threads is None:
        return settings
    return settings.model_copy(update={"embedding": settings.embedding.model_copy(
        update={"onnx_threads": threads})})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--orchestrators", type=int, default=10)
    parser.add_argument("--batch-max", type=int, default=64,
                        help="worker.batch_max of the shard workers (1 = batching off)")
    parser.add_argument("--workers", type=int, choices=(1, 2), default=2,
                        help="2: one worker per shard (as `orchmem up`); 1: one worker for "
                             "both shards")
    parser.add_argument("--worker-onnx-threads", type=int,
                        help="embedding.onnx_threads of the shard workers only (default: "
                             "the setting's default)")
    parser.add_argument("--client-onnx-threads", type=int,
                        help="embedding.onnx_threads of the benchmark's clients only (the "
                             "orchestrators' recall, ten threads in one process; default: "
                             "the setting's default)")
    parser.add_argument("--root", help="keep the data here (default: a temp folder)")
    parser.add_argument("--timeline", action="store_true",
                        help="capture Celery's task events: per task name, the time from "
                             "sent to received, received to started, started to done; and "
                             "each bulletin's steps (bulletin_trace)")
    args = parser.parse_args()
    with temp_root(args.root) as root, redis_server(root / "redis") as url:
        settings = settings_for(root, url, shards=2, memory={"ingest": {"min_file_age_s": 0}},
                                worker={"batch_max": args.batch_max})
        served = with_onnx_threads(settings, args.worker_onnx_threads)
        settings = with_onnx_threads(settings, args.client_onnx_threads)
        app = create_app(settings)
        latencies: dict[str, list[float]] = {"write_back": [], "bulletin": [], "recall": [],
                                             "ingest_drop": []}
        expected: dict[str, set[str]] = {}
        errors: list[str] = []
        lock = threading.Lock()
        with ExitStack() as workers:
            for shards in ([[0], [1]] if args.workers == 2 else [None]):
                workers.enter_context(worker_process(served, shards))
            for index in range(args.orchestrators):  # warm-up: models loaded, files made
                MemoryClient(f"soak-{index}", settings, app=app).bulletin(timeout=120)
            pids = worker_pids(root / "bench.toml")
            servers = redis_pids(url)
            rss_start = rss_mb(pids)
            cpu_start = cpu_now(pids, servers)
            wait_start = wait_now(pids, servers)
            timeline = Timeline(app) if args.timeline else None
            trace = BulletinTrace() if args.timeline else None
            if timeline is not None:
                timeline.start()
            deadline = time.monotonic() + args.minutes * 60
            rss_samples = []

            def orchestrator(index: int) -> None:
                orch = f"soak-{index}"
                client = MemoryClient(orch, settings, app=app)
                rng = random.Random(index)
                mine: set[str] = set()
                n = 0
                while time.monotonic() < deadline:
                    n += 1
                    fact = f"I prefer {' '.join(rng.sample(WORDS, 4))} number {index}-{n}."
                    started = time.perf_counter()
                    handle = client.write_back(transcript={
                        "conversationId": f"c-{n % 7}",
                        "messages": [{"role": "user", "text": fact},
                                     {"role": "assistant", "text": "Noted!"}]})
                    spent = (time.perf_counter() - started) * 1000
                    if handle.ok or handle.outboxed:
                        mine.add(fact)
                    else:
                        with lock:
                            errors.append(handle.error or "?")
                    timed = [("write_back", spent)]
                    started, asked = time.perf_counter(), time.time()
                    got = client.bulletin()
                    timed.append(("bulletin", (time.perf_counter() - started) * 1000))
                    if trace is not None:
                        trace.note(orch, asked, time.time(), got.bulletin.get("generatedAt")
                                   if got.source == "live" else None)
                    started = time.perf_counter()
                    client.recall(" ".join(rng.sample(WORDS, 3)))
                    timed.append(("recall", (time.perf_counter() - started) * 1000))
                    if n % 10 == 0:
                        folder = settings.runtime_root(orch) / "memory" / "ingest"
                        folder.mkdir(parents=True, exist_ok=True)
                        started = time.perf_counter()
                        note = f"Decision: adopt {' '.join(rng.sample(WORDS, 3))} plan {n}."
                        (folder / f"note-{n}.md").write_text(note + "\n")
                        client.ingest_now()
                        timed.append(("ingest_drop", (time.perf_counter() - started) * 1000))
                    with lock:
                        for name, value in timed:
                            latencies[name].append(value)
                client.wait_for_writes(120)
                with lock:
                    expected[orch] = mine

            def sample() -> None:
                while time.monotonic() < deadline:
                    rss_samples.append(rss_mb(pids))
                    time.sleep(5)

            threads = [threading.Thread(target=orchestrator, args=(i,))
                       for i in range(args.orchestrators)]
            threads.append(threading.Thread(target=sample))
            started_all = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started_all
            rss_end = rss_mb(pids)
            cpu_end = cpu_now(pids, servers)
            wait_end = wait_now(pids, servers)
            if timeline is not None:
                time.sleep(1)  # the last events
                timeline.stop()
        missing = duplicated = stored_total = 0
        for orch, facts in expected.items():
            path = settings.runtime_root(orch) / "memory" / "memory.db"
            contents = [r[0] for r in sqlite3.connect(path).execute(
                "SELECT content FROM memories WHERE type = 'Preference'")]
            stored_total += len(contents)
            missing += len(facts - set(contents))
            duplicated += len(contents) - len(set(contents))
        ops = {name: {"count": len(v), "per_s": round(len(v) / elapsed, 1), **percentiles(v)}
               for name, v in latencies.items()}
        emit({"benchmark": "soak", "minutes": args.minutes, "batch_max": args.batch_max,
              "workers": args.workers,
              "worker_onnx_threads": served.embedding.onnx_threads,
              "client_onnx_threads": settings.embedding.onnx_threads,
              "orchestrators": args.orchestrators, "seconds": round(elapsed, 1),
              "operations_ms": ops,
              # CPU per message (write-back, bulletin, recall) of each part, in ms: the
              # soak is a closed loop (each orchestrator waits for its bulletin), so
              # its pace, and the bulletin's latency, follow the CPU a message costs.
              "cpu_ms_per_message": {
                  part: round((cpu_end[part] - cpu_start[part]) * 1000 /
                              max(1, len(latencies["bulletin"])), 2) for part in cpu_end},
              # Time runnable but waiting for a core, per message, in ms: a part that
              # waits long here is short of CPU, not slow.
              "runqueue_wait_ms_per_message": {
                  part: round((wait_end[part] - wait_start[part]) * 1000 /
                              max(1, len(latencies["bulletin"])), 2) for part in wait_end},
              "worker_rss_mb": {"start": rss_start, "end": rss_end,
                                "max": max(rss_samples or [rss_end])},
              "check": {"expected": sum(len(v) for v in expected.values()),
                        "stored": stored_total, "missing": missing,
                        "duplicated": duplicated, "publish_errors": len(errors)},
              **({"timeline": timeline.summary(),
                  "bulletin_trace": trace.summary(timeline, memory_logs(
                      {orch: settings.runtime_root(orch) / "memory" / "logs" / "memory.log"
                       for orch in expected}))}
                 if timeline is not None and trace is not None else {})})


if __name__ == "__main__":
    main()
