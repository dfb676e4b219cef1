"""ASGI middleware of the HTTP API: the body size limit, the access log and the trace.

``BodyLimit`` reads the whole body before the app sees it and stops at
``max_bytes + 1``: a client that lies in Content-Length, or sends chunks with none,
gets 413 all the same. ``AccessLog`` writes one line per request with the method, the
path without its query string (a recall's ``q`` is memory text), the status and the
duration; uvicorn's own access log is off (it prints the query string).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchmem.models.telemetry import names, spans
from orchmem.worker.api.errors import error_body

access_logger = logging.getLogger("orchmem.api.access")
#: Longest path written to the access log (a forged path may be long).
MAX_LOGGED_PATH = 200


async def _send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def _declared_length(scope: Scope) -> int | str | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return "bad"
    return None


class BodyLimit:
    """Refuse (413 ``too_large``) any request body over ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared == "bad":
            await _send_json(send, 400, error_body("validation", "Content-Length is not a number"))
            return
        if isinstance(declared, int) and declared > self.max_bytes:
            await self._too_large(send)
            return
        body = await self._read(receive)
        if body is None:
            await self._too_large(send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None once it passes ``max_bytes`` (the rest is not read)."""
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)  # the client went away: the app sees an empty rest
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.max_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _too_large(self, send: Send) -> None:
        await _send_json(send, 413, error_body(
            "too_large", f"request body over {self.max_bytes} bytes (api.max_body_bytes)"))


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class AccessLog:
    """One log line per request: method, path (no query string), status, duration."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            path = str(scope.get("path", ""))[:MAX_LOGGED_PATH]
            access_logger.info("%s %s %d %.1fms", scope.get("method"), path.encode(
                "unicode_escape").decode("ascii"), status, (time.perf_counter() - started) * 1000)


class Traced:
    """A server span per HTTP request (telemetry on), continuing the caller's trace when
    the request carries ``traceparent``; named by method and route, never by the path's
    values or the query string."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not spans.enabled():
            await self.app(scope, receive, send)
            return
        carrier = {key.decode("latin-1").lower(): value.decode("latin-1")
                   for key, value in scope.get("headers") or []}
        method = str(scope.get("method", ""))
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        with spans.span(method, {names.HTTP_METHOD: method}, kind="server",
                        parent=carrier) as traced:
            try:
                await self.app(scope, receive, sending)
            finally:
                route = getattr(scope.get("route"), "path", None)
                if isinstance(route, str):
                    traced.rename(f"{method} {route}")
                    traced.set(names.HTTP_ROUTE, route)
                traced.set(names.HTTP_STATUS, status)
