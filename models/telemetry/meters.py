"""Metrics as OpenTelemetry instruments: created when telemetry is configured on, and
each recording a no-op until then (the Prometheus endpoint counts tasks either way:
worker/runtime/metrics.py)."""

from __future__ import annotations

from typing import Any

from orchmem.models.telemetry import names

_instruments: dict[str, Any] = {}


def install(meter: Any) -> None:
    """Create the instruments on ``meter`` (None: stop recording)."""
    _instruments.clear()
    if meter is None:
        return
    _instruments.update({
        "recall": meter.create_histogram(
            "orchmem.recall.duration", unit="s", description="Recall latency"),
        "hits": meter.create_histogram(
            "orchmem.recall.hits", unit="{memory}", description="Memories one recall returned"),
        "writes": meter.create_counter(
            "orchmem.task.outcomes", unit="{task}",
            description="Task runs by task and outcome (ok, duplicate, rejected, error codes)"),
        "created": meter.create_counter(
            "orchmem.memories.created", unit="{memory}", description="Memories created"),
        "task": meter.create_histogram(
            "messaging.process.duration", unit="s", description="Task run duration"),
        "wait": meter.create_histogram(
            "orchmem.queue.wait", unit="s",
            description="Time from a message's publish to the start of its task"),
        "batch": meter.create_histogram(
            "orchmem.batch.size", unit="{task}", description="Deliveries applied as one batch"),
    })


def recall_done(seconds: float, hits: int, mode: str) -> None:
    """One recall answered, in ``seconds``, with ``hits`` memories."""
    if not _instruments:
        return
    attributes = {names.MODE: mode}
    _instruments["recall"].record(seconds, attributes)
    _instruments["hits"].record(hits, attributes)


def task_done(task: str, outcome: str, seconds: float, created: int,
              queue_wait_s: float | None) -> None:
    """One task run ended in ``outcome`` after ``seconds``; ``queue_wait_s``: how long
    its message waited in the queue (None: run in the caller's process)."""
    if not _instruments:
        return
    attributes = {names.TASK: task, names.OUTCOME: outcome}
    _instruments["writes"].add(1, attributes)
    _instruments["task"].record(seconds, {names.TASK: task})
    if created:
        _instruments["created"].add(created, {names.TASK: task})
    if queue_wait_s is not None:
        _instruments["wait"].record(max(0.0, queue_wait_s), {names.TASK: task})


def batch_applied(task: str, size: int) -> None:
    """One batch of ``size`` deliveries of ``task`` applied."""
    if _instruments:
        _instruments["batch"].record(size, {names.TASK: task})
