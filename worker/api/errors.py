"""The HTTP API's errors: the CLI's codes, as ``{"ok": false, "error", "message", "errors"}``.

Every refusal the API makes is an :class:`OrchmemError`; its ``code`` picks the HTTP
status (:data:`STATUS`). Two codes exist only at this edge: ``unauthorized`` (no valid
token), ``too_large`` (a body over ``api.max_body_bytes``) and ``too_many_requests``
(429 with ``Retry-After``: the orchestrator's requests in progress are at
``api.max_requests_per_orchestrator``).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

from orchmem.config import MemoryValidationError, OrchmemError


class Unauthorized(OrchmemError):
    """Raised when a request carries no bearer token, or one that is unknown or revoked."""

    code = "unauthorized"


class TooLarge(OrchmemError):
    """Raised when a request body exceeds ``api.max_body_bytes``."""

    code = "too_large"


class TooManyRequests(OrchmemError):
    """Raised when an orchestrator already has ``api.max_requests_per_orchestrator``
    requests in progress."""

    code = "too_many_requests"


class Timeout(OrchmemError):
    """Raised when the worker gave no answer within ``api.wait_timeout_s``."""

    code = "timeout"


#: Seconds a client over its orchestrator's request cap is asked to wait (Retry-After).
RETRY_AFTER_S = 1

#: HTTP status per error code; anything else is a 500.
STATUS = {
    "validation": 422,
    "unauthorized": 401,
    "scope_violation": 403,
    "not_found": 404,
    "erased": 410,
    "method_not_allowed": 405,
    "disabled": 409,
    "too_large": 413,
    "too_many_requests": 429,
    "unsupported_media_type": 415,
    "ingest_rejected": 422,
    "extraction_budget": 422,
    "corrupt": 503,
    "storage": 503,
    "embedding": 503,
    "broker_unavailable": 503,
    "timeout": 504,
}


def error_body(code: str, message: str, errors: list[Any] | None = None,
               **extra: Any) -> dict[str, Any]:
    return {"ok": False, "error": code, "message": message, "errors": errors or [], **extra}


def error_response(exc: OrchmemError) -> Response:
    """The JSON response for ``exc``, with the status its code calls for."""
    body = {**exc.to_dict()}
    errors = exc.errors if isinstance(exc, MemoryValidationError) else []
    payload = error_body(body.pop("error"), body.pop("message"), errors,
                         **{k: v for k, v in body.items() if k != "errors"})
    return json_error(STATUS.get(exc.code, 500), payload)


def json_error(status: int, payload: dict[str, Any]) -> Response:
    headers = ({"WWW-Authenticate": 'Bearer realm="orchmem"'} if status == 401 else
               {"Retry-After": str(RETRY_AFTER_S)} if status == 429 else None)
    return Response(json.dumps(payload, ensure_ascii=False), status_code=status,
                    media_type="application/json", headers=headers)


def code_of(name: str) -> str:
    """The code of the OrchmemError class called ``name`` (a task's failure, as the
    client reports it), or ``"error"``."""
    pending: list[type[OrchmemError]] = [OrchmemError]
    while pending:
        cls = pending.pop()
        if name in (cls.__name__, cls.code):
            return cls.code
        pending.extend(cls.__subclasses__())
    return "error"
