"""Task payloads: what an orchestrator publishes, validated at the worker's door.

A payload is plain JSON (Celery carries JSON only). Its idempotency key is given, or
derived here from the canonical JSON of the payload, so the same request published
twice has the same key on both sides of the queue.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any

from orchmem.config import MemoryValidationError
from pydantic import Field, field_validator

from .schema import EdgeInput, MemoryInput, _Model

_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")
IdempotencyKey = Annotated[str, Field(strict=True, min_length=1, max_length=200)]


def check_key(value: object, where: str = "idempotencyKey") -> str:
    """Return ``value`` if it is a valid idempotency key (1-200 printable ASCII, no spaces)."""
    if not isinstance(value, str) or _KEY.fullmatch(value) is None:
        message = f"{where}: must be 1-200 printable ASCII characters without spaces"
        raise MemoryValidationError(message, [{"path": where, "message": message}])
    return value


def derive_key(orchestrator_id: str, kind: str, payload: dict[str, Any]) -> str:
    """The key of a payload that has none: a hash of its canonical JSON."""
    body = {k: v for k, v in payload.items() if k != "idempotencyKey"}
    try:
        canonical = json.dumps([orchestrator_id, kind, body], sort_keys=True,
                               separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(f"payload is not plain JSON: {exc}") from None
    return f"{kind}-{hashlib.sha256(canonical.encode()).hexdigest()[:32]}"


def key_of(orchestrator_id: str, kind: str, payload: Any) -> str:
    """The given idempotency key of ``payload``, or the derived one."""
    if not isinstance(payload, dict):
        raise MemoryValidationError(
            f"payload must be a JSON object, got {type(payload).__name__}",
            [{"path": "payload", "message": "must be a JSON object"}])
    given = payload.get("idempotencyKey")
    if given is not None:
        return check_key(given)
    return derive_key(orchestrator_id, kind, payload)


class WritebackRequest(_Model):
    """Explicit memories and edges to upsert (SPEC.md "Memory write-back triggers")."""

    idempotency_key: IdempotencyKey | None = None
    memories: list[MemoryInput] = Field(default_factory=list)
    edges: list[EdgeInput] = Field(default_factory=list)

    @field_validator("idempotency_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_key(value)
