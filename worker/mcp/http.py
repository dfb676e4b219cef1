"""The MCP server over streamable HTTP, behind the HTTP API's token rule.

``orchmem mcp --orch ID --http`` serves ID's tools (:mod:`.server`) at ``/mcp``.
Every request needs ``Authorization: Bearer <token>`` of a token bound to ID: none or an
invalid one is 401 ``unauthorized``, a token of another orchestrator is 403
``scope_violation``, logged like every scope violation (:class:`.api_auth.Guard`). The
access log has method, path, status and duration, no memory text.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from orchmem.config import OrchmemError, Settings
from orchmem.models.storage.db.database import Databases
from orchmem.worker.api.auth import Guard
from orchmem.worker.api.errors import error_response
from orchmem.worker.api.middleware import AccessLog, Traced
from orchmem.worker.api.tokens import TokenStore
from orchmem.worker.mcp.server import create_mcp


class TokenGate:
    """Admit an HTTP request only with a token of ``orchestrator_id``."""

    def __init__(self, app: ASGIApp, guard: Guard, orchestrator_id: str) -> None:
        self.app = app
        self.guard = guard
        self.orchestrator_id = orchestrator_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            authorization = next((v.decode("latin-1") for k, v in scope.get("headers", [])
                                  if k == b"authorization"), None)
            try:
                self.guard.admit(authorization, self.orchestrator_id, "mcp")
            except OrchmemError as exc:
                await error_response(exc)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def mcp_http_app(settings: Settings, orchestrator_id: str, *, immediate: bool = False,
                 store: TokenStore | None = None) -> tuple[ASGIApp, Guard]:
    """The ASGI app (its lifespan runs the SDK's session manager) and its guard."""
    server = create_mcp(settings, orchestrator_id, immediate=immediate)
    inner = server.streamable_http_app(host=settings.api.address,
                                       max_request_body_size=settings.api.max_body_bytes)
    guard = Guard(store or TokenStore(settings), Databases(settings, readonly=True))
    return Traced(AccessLog(TokenGate(inner, guard, orchestrator_id))), guard
