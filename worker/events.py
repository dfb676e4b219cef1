"""Celery task events without task results: what Flower shows never holds memory text.

Celery's ``task-succeeded`` event carries the task's return value. orchmem's results
hold memory text (a bulletin's lines, a recall bundle read over the queue), and events
reach Flower and anyone subscribed to the broker's event channel. The results stay in
the result store for the caller; the event says only how long the result was. The
events' other fields (ids, names, runtimes, the short ``kwargsrepr``) are unchanged.
"""

from __future__ import annotations

from typing import Any

from celery.app.events import Events
from celery.events.dispatcher import EventDispatcher


class QuietDispatcher(EventDispatcher):
    """An event dispatcher that replaces a result by its length."""

    def send(self, type: str, *args: Any, **fields: Any) -> Any:
        if "result" in fields:
            fields["result"] = f"<{len(str(fields['result']))} chars, not shown>"
        return super().send(type, *args, **fields)


class QuietEvents(Events):
    dispatcher_cls = "orchmem.worker.events:QuietDispatcher"
