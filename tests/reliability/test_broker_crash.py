"""The embedded Redis is SIGKILLed halfway through 1,000 publishes and restarted: workers
and clients reconnect by themselves, the outbox fills the gap, nothing lost or doubled."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from typing import Any

from orchmem_testing import WorkerProcess, distinct_texts, settings_env, wait_until

from orchmem.worker.client.memory_client import BROKER_BACKOFF_S, MemoryClient
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.broker import EmbeddedRedis

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
TOTAL = 1000
#: The last publishes, well after the restart, must reach the broker directly.
DIRECT_TAIL = 200


def test_broker_killed_mid_stream_loses_no_accepted_write(isolated: Any) -> None:
    settings = isolated(broker_url="", shards=1, worker={"visibility_timeout_s": 3},
                        beat={"outbox_reconcile_interval_s": 5, "outbox_republish_after_s": 5})
    broker = EmbeddedRedis.start(settings)
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    beat_log = settings.root / "logs" / "test-beat.log"
    beat_log.parent.mkdir(parents=True, exist_ok=True)
    with beat_log.open("wb") as out:
        beat = subprocess.Popen([sys.executable, "-m", "orchmem.worker", "beat"],
                                env=settings_env(settings), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    orchestrators = ["storm-a", "storm-b"]
    clients = {o: MemoryClient(o, settings) for o in orchestrators}
    texts = distinct_texts(TOTAL, seed=77)
    accepted: dict[str, list[tuple[str, str]]] = {o: [] for o in orchestrators}
    refused = outboxed = 0
    direct: list[bool] = []  # per publish: True when it reached the broker at once
    try:
        for i, text in enumerate(texts):
            if i == TOTAL // 2:
                broker.process.send_signal(signal.SIGKILL)
                broker.process.wait()
                down_at = time.monotonic()
            if i == TOTAL // 2 + 150:
                time.sleep(max(0.0, 3.0 - (time.monotonic() - down_at)))
                broker = EmbeddedRedis.start(settings, port=broker.port)
                up_at = time.monotonic()
            if i == TOTAL - DIRECT_TAIL:
                # A client that failed to publish leaves the broker alone for
                # BROKER_BACKOFF_S: from then on it must publish directly again, by itself.
                time.sleep(max(0.0, BROKER_BACKOFF_S + 1.0 - (time.monotonic() - up_at)))
            orch = orchestrators[i % 2]
            handle = clients[orch].write_back(
                memories=[{"type": "Fact", "content": text, "source": MANUAL}],
                idempotency_key=f"storm-{i}")
            direct.append(handle.ok)
            if handle.ok or handle.outboxed:
                accepted[orch].append((handle.key, text))
                outboxed += not handle.ok
            else:
                refused += 1
        assert refused == 0  # every write was either published or kept in the outbox
        assert outboxed >= 100  # the outage was real: those waited in the outbox
        # The clients reconnected by themselves: well after the restart every publish
        # reached the broker at once, none went only to the outbox.
        assert all(direct[-DIRECT_TAIL:]), direct[-DIRECT_TAIL:].count(False)
        assert sum(len(v) for v in accepted.values()) == TOTAL

        def stored(orch: str) -> list[str]:
            path = settings.runtime_root(orch) / "memory" / "memory.db"
            if not path.exists():
                return []
            conn = sqlite3.connect(path, timeout=10)
            try:
                return [r[0] for r in conn.execute("SELECT content FROM memories")]
            finally:
                conn.close()

        try:
            wait_until(lambda: all(len(stored(o)) >= len(accepted[o]) for o in orchestrators),
                       timeout=150, interval=1.0, message="every accepted write stored")
        except AssertionError as exc:
            raise AssertionError(_missing(accepted, stored, clients, worker, beat_log)) from exc
        for orch in orchestrators:
            contents = stored(orch)
            assert sorted(contents) == sorted(t for _, t in accepted[orch]), "lost or extra"
            assert len(contents) == len(set(contents)), "a write applied twice"
        assert worker.log_path is not None and worker.process is not None
        assert "Unrecoverable error" not in worker.log_path.read_text()  # reconnect.py
        assert worker.process.poll() is None
        wait_until(lambda: all(not c.outbox.entries() or _reconciled(c) for c in
                               clients.values()), timeout=60, interval=1.0,
                   message="the outbox pruned")
    finally:
        os.killpg(beat.pid, signal.SIGTERM)
        beat.wait(20)
        worker.stop()
        broker.stop()


def _missing(accepted: dict[str, list[tuple[str, str]]], stored: Any,
             clients: dict[str, MemoryClient], worker: WorkerProcess, beat_log: Any) -> str:
    """What a timed-out wait lacked, and what the worker and the beat said meanwhile."""
    lines = []
    for orch, pairs in accepted.items():
        have = set(stored(orch))
        lost = [key for key, text in pairs if text not in have]
        waiting = {e.key: e for e in clients[orch].outbox.entries()}
        lines.append(f"{orch}: {len(lost)} of {len(pairs)} not stored, e.g. {lost[:5]}; "
                     f"{sum(k in waiting for k in lost)} of them in the outbox")
    beat_tail = beat_log.read_text(errors="replace")[-3000:] if beat_log.exists() else ""
    return "\n".join([*lines, "worker log:", worker.log(), "beat log:", beat_tail])


def _reconciled(client: MemoryClient) -> bool:
    return len(client.outbox.entries()) == 0
