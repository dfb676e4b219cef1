"""Where a task's time goes, from Celery's own task events: sent → received → started →
done, per task name (``soak.py --timeline``).

Every event carries the sending process's ``time.time()``: ``task-sent`` from the
publisher, ``task-received`` when the worker's consumer took the message (before the
batching gate), ``task-started`` when the pool began the job holding it, and
``task-succeeded`` / ``task-failed`` once its result was stored and its message
acknowledged. One machine, one clock.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from _harness import percentiles

from orchmem.worker.app import OrchmemCelery

STAGES = ("task-sent", "task-received", "task-started", "task-succeeded")


class Timeline:
    """Captures task events in a thread until :meth:`stop`; :meth:`summary` reads them."""

    def __init__(self, app: OrchmemCelery) -> None:
        self.app = app
        self.tasks: dict[str, dict[str, Any]] = defaultdict(dict)
        self._receiver: Any = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._capture, daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        if self._receiver is not None:
            self._receiver.should_stop = True
        self._thread.join(10)

    def _capture(self) -> None:
        with self.app.connection_for_read() as connection:
            self._receiver = self.app.events.Receiver(
                connection, handlers={"*": self._on_event})
            self._ready.set()
            self._receiver.capture(limit=None, timeout=None, wakeup=False)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        uuid = event.get("uuid")
        if not uuid or not kind.startswith("task-"):
            return
        entry = self.tasks[uuid]
        if kind == "task-failed":
            kind = "task-succeeded"
        if kind in STAGES:
            entry[kind] = float(event["timestamp"])
        if kind == "task-sent":
            entry["name"] = event.get("name")
        if kind == "task-received":
            entry["name"] = entry.get("name") or event.get("name")

    def summary(self) -> dict[str, Any]:
        """Per task name: stage durations (ms, percentiles)."""
        complete = [t for t in self.tasks.values() if all(s in t for s in STAGES)]
        by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for task in complete:
            by_name[str(task["name"]).rsplit(".", 1)[-1]].append(task)
        return {name: _stages(tasks) for name, tasks in by_name.items()}


def _stages(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    def ms(a: str, b: str) -> list[float]:
        return [(t[b] - t[a]) * 1000 for t in tasks]

    return {"count": len(tasks),
            "sent_to_received_ms": percentiles(ms("task-sent", "task-received")),
            "received_to_started_ms": percentiles(ms("task-received", "task-started")),
            "started_to_done_ms": percentiles(ms("task-started", "task-succeeded")),
            "sent_to_done_ms": percentiles(ms("task-sent", "task-succeeded"))}
