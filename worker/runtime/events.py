"""Celery task events without task results, published together: what Flower shows never
holds memory text, and a busy worker does not publish an event message per task.

Celery's ``task-succeeded`` event carries the task's return value. orchmem's results
hold memory text (a bulletin's lines, a recall bundle read over the queue), and events
reach Flower and anyone subscribed to the broker's event channel. The results stay in
the result store for the caller; the event says only how long the result was. The
events' other fields (ids, names, runtimes, the short ``kwargsrepr``) are unchanged.

A worker's task events wait in Celery's own buffer (``task.multi`` messages) and
Celery flushes it on the event loop's next turn: one turn reads one message from the
broker, so a backlog of write-backs cost one event message (a ``PUBLISH``, a new Redis
client object in kombu) per task, a third to a half of the worker parent's CPU in a burst.
:class:`PacedFlush` flushes it at most every :data:`FLUSH_EVERY_S` instead (and when
Celery's buffer is full). Each event keeps the time it was sent (its ``timestamp``);
only its delivery to Flower waits, at most that long.
"""

from __future__ import annotations

from typing import Any

from celery import bootsteps
from celery.app.events import Events
from celery.events.dispatcher import EventDispatcher

#: The longest a worker's task event waits in its buffer before it is published.
FLUSH_EVERY_S = 0.05


class QuietDispatcher(EventDispatcher):
    """An event dispatcher that replaces a result by its length."""

    def send(self, type: str, *args: Any, **fields: Any) -> Any:
        if "result" in fields:
            fields["result"] = f"<{len(str(fields['result']))} chars, not shown>"
        return super().send(type, *args, **fields)


class QuietEvents(Events):
    dispatcher_cls = "orchmem.worker.runtime.events:QuietDispatcher"


class PacedFlush(bootsteps.StartStopStep):
    """A consumer step: the worker's buffered task events are flushed once per
    :data:`FLUSH_EVERY_S`, not on every turn of the event loop."""

    requires = ("celery.worker.consumer.events:Events",)

    def start(self, c: Any) -> None:
        dispatcher = c.event_dispatcher
        if dispatcher is None or c.hub is None or dispatcher.on_send_buffered is None:
            return  # no events, or not buffered (no event loop): Celery's own path
        pending = False

        def flush() -> None:
            # Celery's own flush, on the loop's next turn as Celery does it (an error
            # there is the consumer's, as before: a lost broker restarts it), only later.
            nonlocal pending
            pending = False
            if c.event_dispatcher is dispatcher:  # not closed by a reconnection since
                c.on_send_event_buffered()

        def buffered() -> None:
            nonlocal pending
            if not pending:
                pending = True
                c.timer.call_after(FLUSH_EVERY_S, flush)

        dispatcher.on_send_buffered = buffered


def install(app: Any) -> None:
    """Pace this worker's task events (before it starts)."""
    app.steps["consumer"].add(PacedFlush)
