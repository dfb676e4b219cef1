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
from datetime import datetime
from pathlib import Path
from typing import Any

from _harness import percentiles

from orchmem.worker.runtime.app import OrchmemCelery

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


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class BulletinTrace:
    """One soak bulletin's timeline, step by step (``soak.py --timeline``).

    The client notes when it asked and when it had the answer (and the answer's
    ``generatedAt``: when the worker began building it); the orchestrator's memory.log
    has when the worker finished building it (its ``bulletin`` line, with the task id)
    and when its write-backs ran (``writeback`` lines); Celery's task events
    (:class:`Timeline`) have sent, received (the worker's consumer) and started (the
    pool job holding it). One machine, one clock."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, float, str | None]] = []
        self._lock = threading.Lock()

    def note(self, orchestrator: str, asked: float, answered: float,
             generated_at: str | None) -> None:
        with self._lock:
            self.calls.append((orchestrator, asked, answered, generated_at))

    def summary(self, timeline: Timeline, logs: dict[str, list[dict[str, Any]]]
                ) -> dict[str, Any]:
        """Medians etc. of each step, over every bulletin matched to its log line."""
        steps: dict[str, list[float]] = defaultdict(list)
        for orchestrator, asked, answered, generated_at in self.calls:
            records = logs.get(orchestrator, [])
            built = [r for r in records if r.get("event") == "bulletin"
                     and asked <= _epoch(r["at"]) <= answered]
            if len(built) != 1 or generated_at is None:
                continue
            task = timeline.tasks.get(str(built[0].get("taskId")), {})
            if not all(s in task for s in STAGES[:3]):
                continue
            start, end = _epoch(generated_at), _epoch(built[0]["at"])
            writes = [_epoch(r["at"]) for r in records if r.get("event") == "writeback"
                      and task["task-started"] <= _epoch(r["at"]) <= start]
            marks = [("client_to_sent", asked, task["task-sent"]),
                     ("sent_to_received", task["task-sent"], task["task-received"]),
                     ("received_to_job_started", task["task-received"],
                      task["task-started"]),
                     ("job_started_to_build", task["task-started"], start),
                     ("build", start, end),
                     ("built_to_client", end, answered),
                     ("total", asked, answered)]
            if writes:
                marks += [("job_started_to_own_writeback", task["task-started"], writes[-1]),
                          ("own_writeback_to_build", writes[-1], start)]
            for name, a, b in marks:
                steps[name].append((b - a) * 1000)
        return {"count": len(steps["total"]),
                **{name: percentiles(values, (50, 95)) for name, values in steps.items()}}


def memory_logs(paths: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    """Each orchestrator's memory.log records (this run's file, not rotated ones)."""
    import json

    logs = {}
    for orchestrator, path in paths.items():
        records = []
        for part in sorted(path.parent.glob(path.name + "*")):  # and rotated ones
            if part.name.endswith(".lock"):
                continue
            for line in part.read_text("utf-8", errors="replace").splitlines():
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue
        logs[orchestrator] = records
    return logs
