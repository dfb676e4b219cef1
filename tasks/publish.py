"""The one way a message leaves for a queue: envelope, stable task id, short repr, outbox.

Every message (the client's requests, the CLI's, a task's follow-up, a beat fan-out)
goes through :func:`send`. A request for an orchestrator is first made an
:class:`Envelope` (:func:`envelope`): the orchestratorId is checked, the idempotency
key fixed and written into the payload, the time of the request recorded. Then:

- the task id is stable, ``<orchestratorId>/<key>``: a re-published request (by the
  outbox reconciler, a retrying caller, a dead-letter retry) has the same id, so a
  handle that waits for it finds the result of whichever delivery ran;
- Flower shows a short summary of the payload (counts, ids), never memory text;
- :func:`publish` records a user's request (write-back, edit, ingest) in the
  orchestrator's outbox before it leaves, so a broker that is down delays it but
  never loses it;
- an app in immediate mode (``task_always_eager``: ``MemoryClient(...,
  immediate=True)``) runs the task in this process instead, with no broker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import Celery
from celery.result import AsyncResult
from kombu.exceptions import KombuError, OperationalError
from redis.exceptions import RedisError

from orchmem.config import BrokerUnavailable, StorageError, check_orchestrator_id
from orchmem.models.core.payloads import key_of
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.storage.delivery.outbox import Outbox
from orchmem.models.telemetry import names, spans

logger = logging.getLogger(__name__)

#: Requests a user made, recorded in the outbox before they are published.
DURABLE_KINDS = frozenset({"wb", "edit", "ingest", "log", "review"})
#: Retries of one publish before the broker counts as unreachable.
RETRY_POLICY = {"max_retries": 3, "interval_start": 0.2, "interval_step": 0.5,
                "interval_max": 1.0}


@dataclass(frozen=True)
class Envelope:
    """One request for one orchestrator, ready to be sent (and re-sent) as it is."""

    orchestrator_id: str
    task: str
    kind: str
    key: str
    payload: dict[str, Any]
    #: Its key was made for this request alone (a bulletin's uuid): no earlier delivery
    #: can have stored an outcome under its task id, so none is dropped before sending.
    fresh: bool = False

    @property
    def task_id(self) -> str:
        return f"{self.orchestrator_id}/{self.key}"

    @property
    def durable(self) -> bool:
        return self.kind in DURABLE_KINDS

    @property
    def kwargs(self) -> dict[str, Any]:
        return {"orchestrator_id": self.orchestrator_id, "payload": self.payload}


def envelope(orchestrator_id: str, task: str, kind: str, payload: dict[str, Any]) -> Envelope:
    """Check the orchestratorId, fix the idempotency key (given, or derived from the
    payload) and the time of the request. Raises MemoryValidationError."""
    check_orchestrator_id(orchestrator_id)
    key = key_of(orchestrator_id, kind, payload)
    prepared = {**payload, "idempotencyKey": key}
    if kind in ("wb", "log") and "requestedAt" not in payload:
        prepared["requestedAt"] = format_ts(utc_now())
    return Envelope(orchestrator_id, task, kind, key, prepared)


def resend(orchestrator_id: str, task: str, payload: dict[str, Any]) -> Envelope:
    """The envelope of a request sent before (its payload carries its key)."""
    return Envelope(orchestrator_id, task, "", str(payload["idempotencyKey"]), payload)


def short_repr(payload: dict[str, Any]) -> str:
    """A one-line summary of a payload for Flower: counts and key, never whole texts."""
    parts = []
    for name, value in payload.items():
        if isinstance(value, list):
            parts.append(f"{name}=[{len(value)}]")
        elif isinstance(value, dict):
            parts.append(f"{name}={{{len(value)} keys}}")
        elif isinstance(value, str) and name in ("idempotencyKey", "op", "memoryId", "key",
                                                  "requestedAt"):
            parts.append(f"{name}={value[:80]!r}")
        elif isinstance(value, str):
            parts.append(f"{name}=<{len(value)} chars>")
        else:
            parts.append(f"{name}={value!r}")
    return "{" + ", ".join(parts) + "}"


def kwargs_repr(kwargs: dict[str, Any]) -> str:
    """What Flower shows of a message's kwargs: the payload as :func:`short_repr`."""
    shown = (f"{name!r}: " + (short_repr(value) if name == "payload" and isinstance(value, dict)
                              else repr(value)) for name, value in kwargs.items())
    return "{" + ", ".join(shown) + "}"


def send(app: Celery, task: str, kwargs: dict[str, Any], *, task_id: str | None = None,
         expires_s: float | None = None, ignore_result: bool = False,
         sent_event: bool = True, fresh: bool = False) -> AsyncResult:
    """Send one message (routed by the app's shard router), or run it here in immediate
    mode. ``ignore_result``: nothing is stored in (or awaited from) the result store,
    for a task that answers its caller another way. ``sent_event=False``: no task-sent
    event even when the app sends them (for a task whose worker sends no events).
    ``fresh``: ``task_id`` was never sent before (no stored outcome to drop).
    Raises BrokerUnavailable when the broker refuses or cannot be reached."""
    if app.conf.task_always_eager:
        return app.tasks[task].apply(kwargs=kwargs, task_id=task_id)
    try:
        if task_id is not None and not fresh:
            # The id is stable across re-sends: drop the stored outcome of an earlier
            # delivery, so whoever waits now gets this delivery's answer (the same ids,
            # marked ``duplicate`` when the receipt says it was applied before).
            app.backend.forget(task_id)
        return app.send_task(task, kwargs=kwargs, task_id=task_id, kwargsrepr=kwargs_repr(kwargs),
                             expires=expires_s, retry=True, retry_policy=RETRY_POLICY,
                             headers=_route_headers(app), ignore_result=ignore_result,
                             **({} if sent_event else {"event_dispatcher": _NO_EVENTS}))
    except (OperationalError, KombuError, RedisError, OSError, RuntimeError) as exc:
        # RuntimeError: Celery's Redis result consumer gives up subscribing that way.
        detail = " ".join(str(exc).split()) if not isinstance(exc, RuntimeError) else \
            "the result store did not answer"
        raise BrokerUnavailable(f"cannot publish {task}: broker unreachable ({detail})") from exc


class _NoEvents:
    """An event dispatcher that sends nothing: Celery's ``send_task`` hands its task-sent
    event to the ``event_dispatcher`` option, when given, instead of the app's."""

    def publish(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_EVENTS = _NoEvents()


def _route_headers(app: Celery) -> dict[str, Any]:
    """The shard count the message is routed under: a worker that finds it on the wrong
    queue after ``shards`` changed forwards it instead of refusing it. And when it was
    sent (ns): a worker puts messages the broker gave back after a crash (in reverse)
    in this order again. And the sender's trace context (W3C ``traceparent``), when
    telemetry is on: the worker's task span continues the sender's trace."""
    settings = getattr(app, "settings", None)
    sent = {"orchmemSentAt": time.time_ns(), **spans.headers()}
    return sent if settings is None else {"orchmemShards": settings.shards, **sent}


def send_envelope(app: Celery, env: Envelope, *, expires_s: float | None = None) -> AsyncResult:
    """:func:`send` for one orchestrator's request, under its stable task id."""
    return send(app, env.task, env.kwargs, task_id=env.task_id, expires_s=expires_s,
                fresh=env.fresh)


def publish(app: Celery, env: Envelope, outbox: Outbox | None = None, *,
            expires_s: float | None = None,
            before_send: Callable[[], None] | None = None,
            outbox_required: bool = True) -> AsyncResult:
    """Record a durable request in ``outbox`` (when given), then send it and mark it sent.

    ``before_send`` runs between the two (the client's fast broker check). Raises
    StorageError when the outbox cannot be written (nothing was sent) and
    BrokerUnavailable when the broker cannot be reached (the outbox keeps the request;
    the reconciler sends it later). With ``outbox_required=False`` (an operator's
    command, whose folder may be read-only or full) an outbox that cannot be written is
    logged and the request is sent without it.
    """
    keep = outbox if env.durable and not app.conf.task_always_eager else None
    if keep is not None:
        try:
            with spans.span(names.SPAN_OUTBOX, {names.DB_SYSTEM: names.DB_SYSTEM_VALUE,
                                                      names.DB_OPERATION: "INSERT"}):
                keep.record(env.key, env.task, env.payload)
        except StorageError as exc:
            if outbox_required:
                raise
            logger.warning("%s for %s sent without its outbox: %s", env.task,
                           env.orchestrator_id, exc)
            keep = None
    if before_send is not None:
        before_send()
    result = send_envelope(app, env, expires_s=expires_s)
    if keep is not None:
        try:
            keep.mark_published(env.key)
        except StorageError as exc:  # sent: at worst the reconciler sends it once more
            logger.warning("outbox of %s not updated after a publish: %s",
                           env.orchestrator_id, exc)
    return result


def follow_up_key(key: str) -> str:
    """The key of the task that continues ``key``'s work: ``<base>+<n>``, one number that
    counts up, so a long chain of follow-ups never outgrows the key's length limit."""
    base, plus, count = key.rpartition("+")
    if plus and count.isdigit():
        return f"{base}+{int(count) + 1}"
    return f"{key}+1"
