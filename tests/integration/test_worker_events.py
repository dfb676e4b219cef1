"""``worker.task_events``: a shard worker sends Celery's task events (Flower's *Tasks*
view) unless the setting turns them off; the work is the same either way."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from orchmem_testing import WorkerProcess, unique_id, wait_until

from orchmem.worker.app import create_app
from orchmem.worker.client import MemoryClient

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
WORKER_EVENTS = {"task-received", "task-started", "task-succeeded"}


@pytest.mark.parametrize("task_events", [True, False])
def test_a_shard_worker_sends_task_events_only_when_set_to(isolated: Any,
                                                           task_events: bool) -> None:
    settings = isolated(worker={"task_events": task_events})
    app = create_app(settings)
    seen: list[str] = []
    stop = threading.Event()

    def listen() -> None:
        with app.connection() as conn:
            receiver = app.events.Receiver(conn, handlers={"*": lambda e: seen.append(
                e["type"])})
            while not stop.is_set():
                try:
                    receiver.capture(limit=None, timeout=0.5, wakeup=False)
                except (TimeoutError, OSError):
                    continue

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    worker = WorkerProcess(settings).start(app)
    try:
        time.sleep(1.0)  # subscribed before the task runs
        client = MemoryClient(unique_id("events"), settings, app=app)
        assert client.write_back(memories=[{"type": "Fact", "content": "Tea at four",
                                            "source": MANUAL}]).wait(60)["ok"]
        # The client's own task-sent event arrives either way: the channel works.
        wait_until(lambda: "task-sent" in seen, timeout=20, message="the task-sent event")
        if task_events:
            wait_until(lambda: "task-succeeded" in seen, timeout=20,
                       message="the worker's task events")
        else:
            time.sleep(2.0)  # the worker's events, were there any, follow its result
            assert not WORKER_EVENTS & set(seen), seen
    finally:
        stop.set()
        thread.join(5)
        worker.stop()
