"""Metrics as OpenTelemetry instruments, and as Prometheus metrics where a process
serves them: created when telemetry is configured on (or a Prometheus sink is
installed: worker/runtime/metrics.py), each recording a no-op until then.

Every recording goes to the OpenTelemetry instrument of its name (:data:`INSTRUMENTS`)
and to each installed :class:`Sink`; a sink names the metric after the instrument
(``orchmem.context.budget_use`` → ``orchmem_context_budget_use``) with the attributes
as labels."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from orchmem.models.telemetry import names

Instrument = Literal["counter", "histogram", "gauge"]

#: Every instrument: (kind, unit, description), by name (names.py holds the names).
INSTRUMENTS: dict[str, tuple[Instrument, str, str]] = {
    names.M_RECALL_DURATION: ("histogram", "s", "Recall latency"),
    names.M_RECALL_HITS: ("histogram", "{memory}", "Memories one recall returned"),
    names.M_TASK_OUTCOMES: (
        "counter", "{task}",
        "Task runs by task and outcome (ok, duplicate, rejected, error codes)"),
    names.M_MEMORIES_CREATED: ("counter", "{memory}", "Memories created"),
    names.M_TASK_DURATION: ("histogram", "s", "Task run duration"),
    names.M_QUEUE_WAIT: ("histogram", "s",
                         "Time from a message's publish to the start of its task"),
    names.M_BATCH_SIZE: ("histogram", "{task}", "Deliveries applied as one batch"),
    names.M_CONTEXT_BUDGET: (
        "histogram", "1",
        "Share of its budget a context block used (tokens when a token budget is given, "
        "else characters)"),
    names.M_PROJECTION_LAG: (
        "gauge", "{item}",
        "Items behind the log watermark, seen at recall: episodes of ended runs not "
        "projected yet, memories without a current vector"),
    names.M_MIGRATIONS: ("counter", "{migration}",
                         "Schema migrations by outcome (started, completed, failed)"),
    names.M_REFLECTIONS: ("counter", "{run}", "Reflection runs by outcome (ok, error)"),
    names.M_REEMBEDDED: ("counter", "{memory}",
                         "Memories re-embedded by outcome (embedded, failed)"),
}

#: Histogram buckets of the Prometheus sink, by instrument (its default otherwise).
BUCKETS = {names.M_CONTEXT_BUDGET: (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.5),
           names.M_RECALL_HITS: (0, 1, 2, 5, 10, 20, 50)}


class Sink(Protocol):
    """Somewhere else recordings go (the Prometheus endpoint of a worker)."""

    def record(self, name: str, kind: Instrument, value: float,
               attributes: dict[str, str]) -> None: ...


_instruments: dict[str, Any] = {}
_sinks: list[Sink] = []


def install(meter: Any) -> None:
    """Create the instruments on ``meter`` (None: stop recording to OpenTelemetry)."""
    _instruments.clear()
    if meter is None:
        return
    make = {"counter": meter.create_counter, "histogram": meter.create_histogram,
            "gauge": getattr(meter, "create_gauge", meter.create_histogram)}
    for name, (kind, unit, description) in INSTRUMENTS.items():
        _instruments[name] = make[kind](name, unit=unit, description=description)


def install_sink(sink: Sink | None) -> None:
    """Send every recording to ``sink`` as well (None: to no sink any more)."""
    _sinks.clear()
    if sink is not None:
        _sinks.append(sink)


def recording() -> bool:
    """Whether any recording goes anywhere (telemetry on or a sink installed)."""
    return bool(_instruments or _sinks)


def _record(name: str, value: float, attributes: dict[str, str]) -> None:
    instrument = _instruments.get(name)
    kind = INSTRUMENTS[name][0]
    if instrument is not None:
        if kind == "counter":
            instrument.add(value, attributes)
        elif hasattr(instrument, "set"):
            instrument.set(value, attributes)
        else:
            instrument.record(value, attributes)
    for sink in _sinks:
        sink.record(name, kind, value, attributes)


def recall_done(seconds: float, hits: int, mode: str) -> None:
    """One recall answered, in ``seconds``, with ``hits`` memories."""
    if recording():
        attributes = {names.MODE: mode}
        _record(names.M_RECALL_DURATION, seconds, attributes)
        _record(names.M_RECALL_HITS, hits, attributes)


def task_done(task: str, outcome: str, seconds: float, created: int,
              queue_wait_s: float | None) -> None:
    """One task run ended in ``outcome`` after ``seconds``; ``queue_wait_s``: how long
    its message waited in the queue (None: run in the caller's process)."""
    if not _instruments:
        return
    attributes = {names.TASK: task, names.OUTCOME: outcome}
    _instruments[names.M_TASK_OUTCOMES].add(1, attributes)
    _instruments[names.M_TASK_DURATION].record(seconds, {names.TASK: task})
    if created:
        _instruments[names.M_MEMORIES_CREATED].add(created, {names.TASK: task})
    if queue_wait_s is not None:
        _instruments[names.M_QUEUE_WAIT].record(max(0.0, queue_wait_s), {names.TASK: task})


def batch_applied(task: str, size: int) -> None:
    """One batch of ``size`` deliveries of ``task`` applied."""
    if _instruments:
        _instruments[names.M_BATCH_SIZE].record(size, {names.TASK: task})


def context_built(purpose: str, used: int, budget: int, unit: str) -> None:
    """A context block of ``used`` ``unit`` (tokens or chars) out of ``budget``."""
    if recording() and budget > 0:
        _record(names.M_CONTEXT_BUDGET, used / budget,
                {names.CONTEXT_PURPOSE: purpose, names.BUDGET_UNIT: unit})


def projection_lag(episodes: int, vectors: int) -> None:
    """What a recall found behind the log watermark."""
    if recording():
        _record(names.M_PROJECTION_LAG, episodes, {names.PROJECTION: "episodes"})
        _record(names.M_PROJECTION_LAG, vectors, {names.PROJECTION: "vectors"})


def migration(outcome: str) -> None:
    """A schema migration ``started``, ``completed`` or ``failed``."""
    if recording():
        _record(names.M_MIGRATIONS, 1, {names.OUTCOME: outcome})


def reflection_done(outcome: str) -> None:
    """One reflection run ended in ``outcome`` (ok, or the error's type)."""
    if recording():
        _record(names.M_REFLECTIONS, 1, {names.OUTCOME: outcome})


def reembedded(outcome: str, count: int) -> None:
    """``count`` memories ``embedded`` anew (or ``failed`` to be)."""
    if recording() and count:
        _record(names.M_REEMBEDDED, count, {names.OUTCOME: outcome})
