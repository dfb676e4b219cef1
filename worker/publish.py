"""Publishing a task for an orchestrator: key, route, short repr for Flower, broker errors.

The idempotency key is fixed here, before the message leaves, and written into the
payload: a re-publish (by the outbox reconciler, or a retrying caller) carries the
same key, so the worker applies it once. Each publish still gets its own Celery task
id (``<orchestrator>/<key>/<random>``): a caller waits for the outcome of its own
message, and Flower shows every delivery, while the receipt in SQLite is the truth
about whether the key was applied.
"""

from __future__ import annotations

import uuid
from typing import Any

from celery.result import AsyncResult
from kombu.exceptions import KombuError, OperationalError
from redis.exceptions import RedisError

from orchmem.config import BrokerUnavailable, check_orchestrator_id
from orchmem.models.payloads import key_of
from orchmem.models.schema import format_ts, utc_now

from .app import OrchmemCelery


def task_id_for(orchestrator_id: str, key: str) -> str:
    return f"{orchestrator_id}/{key}/{uuid.uuid4().hex[:12]}"


def short_repr(payload: dict[str, Any]) -> str:
    """A one-line summary of a payload for Flower: counts and key, never whole texts."""
    parts = []
    for name, value in payload.items():
        if isinstance(value, list):
            parts.append(f"{name}=[{len(value)}]")
        elif isinstance(value, dict):
            parts.append(f"{name}={{{len(value)} keys}}")
        elif isinstance(value, str):
            parts.append(f"{name}={value[:60]!r}")
        else:
            parts.append(f"{name}={value!r}")
    return "{" + ", ".join(parts) + "}"


def prepare(orchestrator_id: str, kind: str, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Validate the orchestratorId, fix the key (and, for a write-back, the time it was
    requested); returns ``(key, payload with them)``."""
    check_orchestrator_id(orchestrator_id)
    key = key_of(orchestrator_id, kind, payload)
    prepared = {**payload, "idempotencyKey": key}
    if kind == "wb" and "requestedAt" not in payload:
        prepared["requestedAt"] = format_ts(utc_now())
    return key, prepared


def send(app: OrchmemCelery, task_name: str, orchestrator_id: str, key: str,
         payload: dict[str, Any]) -> AsyncResult:
    """Publish one task to the orchestrator's shard queue.

    Raises BrokerUnavailable when the broker refuses or cannot be reached.
    """
    kwargs = {"orchestrator_id": orchestrator_id, "payload": payload}
    try:
        return app.send_task(
            task_name,
            kwargs=kwargs,
            task_id=task_id_for(orchestrator_id, key),
            kwargsrepr=f"{{'orchestrator_id': {orchestrator_id!r}, "
                       f"'payload': {short_repr(payload)}}}",
            retry=True,
            retry_policy={"max_retries": 3, "interval_start": 0.2, "interval_step": 0.5,
                          "interval_max": 1.0},
        )
    except (OperationalError, KombuError, RedisError, OSError, RuntimeError) as exc:
        # RuntimeError: Celery's Redis result consumer gives up subscribing that way.
        detail = " ".join(str(exc).split()) if not isinstance(exc, RuntimeError) else \
            "the result store did not answer"
        raise BrokerUnavailable(
            f"cannot publish {task_name} for {orchestrator_id!r}: broker unreachable ({detail})"
        ) from exc


def publish(app: OrchmemCelery, task_name: str, orchestrator_id: str, kind: str,
            payload: dict[str, Any]) -> tuple[str, AsyncResult]:
    """``prepare`` then ``send``; returns ``(key, result handle)``."""
    key, payload = prepare(orchestrator_id, kind, payload)
    return key, send(app, task_name, orchestrator_id, key, payload)
