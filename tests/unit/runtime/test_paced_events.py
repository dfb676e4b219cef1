"""``PacedFlush``: a shard worker's buffered task events are flushed once per
``FLUSH_EVERY_S``, by Celery's own flush, and never through a dispatcher a
reconnection has replaced."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from orchmem.worker.runtime.events import FLUSH_EVERY_S, PacedFlush


class _Timer:
    def __init__(self) -> None:
        self.calls: list[tuple[float, Callable[[], None]]] = []

    def call_after(self, seconds: float, fun: Callable[[], None]) -> None:
        self.calls.append((seconds, fun))


def _consumer() -> Any:
    consumer = SimpleNamespace(hub=object(), timer=_Timer(), flushes=0,
                               event_dispatcher=SimpleNamespace(on_send_buffered=lambda: None))

    def on_send_event_buffered() -> None:
        consumer.flushes += 1

    consumer.on_send_event_buffered = on_send_event_buffered
    return consumer


def test_events_buffered_together_are_flushed_once_after_the_interval() -> None:
    c = _consumer()
    PacedFlush.start(PacedFlush.__new__(PacedFlush), c)
    for _ in range(5):
        c.event_dispatcher.on_send_buffered()
    assert [seconds for seconds, _ in c.timer.calls] == [FLUSH_EVERY_S]
    assert c.flushes == 0
    c.timer.calls[0][1]()
    assert c.flushes == 1
    c.event_dispatcher.on_send_buffered()  # the next event starts the next interval
    assert len(c.timer.calls) == 2
    c.timer.calls[1][1]()
    assert c.flushes == 2


def test_a_flush_due_after_a_reconnection_leaves_the_new_dispatcher_alone() -> None:
    c = _consumer()
    PacedFlush.start(PacedFlush.__new__(PacedFlush), c)
    c.event_dispatcher.on_send_buffered()
    c.event_dispatcher = SimpleNamespace(on_send_buffered=lambda: None)
    c.timer.calls[0][1]()
    assert c.flushes == 0


def test_no_events_or_no_event_loop_keeps_celerys_own_flush() -> None:
    for c in (SimpleNamespace(event_dispatcher=None, hub=object()),
              SimpleNamespace(event_dispatcher=SimpleNamespace(on_send_buffered=print),
                              hub=None)):
        PacedFlush.start(PacedFlush.__new__(PacedFlush), c)
        assert c.event_dispatcher is None or c.event_dispatcher.on_send_buffered is print
