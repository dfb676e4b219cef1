"""The metrics facade: nothing recorded while nothing is installed; a sink receives
each recording by instrument name, and the Prometheus sink names it after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from orchmem.models.telemetry import meters, names
from orchmem.worker.runtime.metrics import PrometheusSink, label_name


class Recorded:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, float, dict[str, str]]] = []

    def record(self, name: str, kind: meters.Instrument, value: float,
               attributes: dict[str, str]) -> None:
        self.seen.append((name, kind, value, attributes))


@pytest.fixture
def sink() -> Iterator[Recorded]:
    recorded = Recorded()
    meters.install_sink(recorded)
    try:
        yield recorded
    finally:
        meters.install_sink(None)


def test_nothing_is_recorded_while_nothing_is_installed() -> None:
    assert not meters.recording()
    meters.context_built("step", 10, 100, "tokens")
    meters.projection_lag(1, 2)
    meters.migration("started")
    meters.reflection_done("ok")
    meters.reembedded("embedded", 3)
    assert not meters.recording()


def test_a_sink_receives_each_recording(sink: Recorded) -> None:
    meters.context_built("step", 30, 120, "tokens")
    meters.context_built("step", 30, 0, "chars")  # no budget: nothing to divide by
    meters.projection_lag(1, 2)
    meters.migration("failed")
    meters.reembedded("embedded", 0)  # nothing embedded: nothing counted
    assert sink.seen == [
        (names.M_CONTEXT_BUDGET, "histogram", 0.25,
         {names.CONTEXT_PURPOSE: "step", names.BUDGET_UNIT: "tokens"}),
        (names.M_PROJECTION_LAG, "gauge", 1, {names.PROJECTION: "episodes"}),
        (names.M_PROJECTION_LAG, "gauge", 2, {names.PROJECTION: "vectors"}),
        (names.M_MIGRATIONS, "counter", 1, {names.OUTCOME: "failed"})]


def test_the_prometheus_sink_names_metrics_after_their_instruments() -> None:
    registry = CollectorRegistry()
    meters.install_sink(PrometheusSink(registry))
    try:
        meters.reflection_done("ok")
        meters.reflection_done("ok")
        meters.reembedded("failed", 4)
        meters.projection_lag(0, 7)
        meters.context_built("diagnostics", 450, 1000, "chars")
    finally:
        meters.install_sink(None)
    text = generate_latest(registry).decode()
    assert 'orchmem_reflection_runs_total{outcome="ok"} 2.0' in text
    assert 'orchmem_reembed_memories_total{outcome="failed"} 4.0' in text
    assert 'orchmem_projection_lag{projection="vectors"} 7.0' in text
    assert ('orchmem_context_budget_use_bucket{context_budget_unit="chars",'
            'context_purpose="diagnostics",le="0.5"} 1.0') in text
    assert label_name(names.CONTEXT_PURPOSE) == "context_purpose"
