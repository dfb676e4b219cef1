"""``worker.task_events``: a shard worker sends Celery's task events (Flower's *Tasks*
view) unless the setting turns them off; the work is the same either way."""

from __future__ import annotations

import time
from typing import Any

import pytest
from orchmem_testing import WorkerProcess, task_events, unique_id, wait_until

from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import create_app

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
WORKER_EVENTS = {"task-received", "task-started", "task-succeeded"}


@pytest.mark.parametrize("events_on", [True, False])
def test_a_shard_worker_sends_task_events_only_when_set_to(isolated: Any,
                                                           events_on: bool) -> None:
    settings = isolated(worker={"task_events": events_on})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        with task_events(app) as seen:
            client = MemoryClient(unique_id("events"), settings, app=app)
            assert client.write_back(memories=[{"type": "Fact", "content": "Tea at four",
                                                "source": MANUAL}]).wait(60)["ok"]
            # The worker's heartbeats arrive either way: the channel works.
            wait_until(lambda: any(e["type"] == "worker-heartbeat" for e in seen),
                       timeout=20, message="a worker heartbeat")
            if events_on:
                wait_until(lambda: any(e["type"] == "task-succeeded" for e in seen),
                           timeout=20, message="the worker's task events")
            else:
                time.sleep(2.0)  # the worker's events, were there any, follow its result
        types = {e["type"] for e in seen}
        # The client's task-sent event goes with the worker's events: on or off together.
        assert bool(WORKER_EVENTS & types) is events_on, types
        assert ("task-sent" in types) is events_on, types
    finally:
        worker.stop()
