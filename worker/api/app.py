"""The HTTP API: one orchestrator's memory over HTTP, for orchestrators on other hosts
and in other languages (``orchmem serve``).

Every path under ``/v1/orchestrators/{orchestratorId}/`` needs a bearer token bound to
that orchestrator (:mod:`.auth`); ``GET /v1/health`` and ``GET /openapi.json`` need
none. Each handler parses, calls one :class:`~orchmem.worker.client.memory_client.MemoryClient`
method, and shapes its result: the domain stays in the client.

=========================  =====================================================
``GET  …/recall``          ``q``, ``top_n``, ``type`` (repeatable), ``include_inactive``:
                           the JSON of ``orchmem recall --json``
``POST …/writeback``       the client's write-back payload (``WritebackRequest``)
``POST …/supersede``       ``{memoryId, by | content, reason?}``
``POST …/retract``         ``{memoryId, reason}``
``POST …/link``            ``{fromMemoryId, toMemoryId, edgeType, weight?, reason?}``
``POST …/forget``          ``{memoryId, hard?, reason?}``
``GET  …/bulletin``        the bulletin (live, else the last snapshot), as the CLI's
``POST …/context``         ``{purpose, query}``: the prompt block
``POST …/ingest``          publish a scan of the orchestrator's ingest folder
``GET  …/stats``           counts, sizes, last bulletin and ingest
=========================  =====================================================

Writes answer 200 with the worker's ``result`` once it committed, or 202 (``queued``)
when ``wait=false`` or the worker did not answer within ``api.wait_timeout_s``. They
are checked and published in a pool of their own (``api.write_threads``) and wait for
the worker on the event loop, holding no thread
(:mod:`orchmem.worker.client.write_wait`); reads use the server's default pool. Each
orchestrator has at most ``api.max_requests_per_orchestrator`` requests in progress:
past that, 429 ``too_many_requests`` with ``Retry-After``. Errors are ``{"ok": false,
"error": code, "message", "errors"}`` (:mod:`orchmem.worker.api.errors`).
"""

from __future__ import annotations

import logging
from importlib.metadata import version
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from orchmem.config import MemoryValidationError, OrchmemError, Settings
from orchmem.models.core.payloads import WritebackRequest
from orchmem.models.telemetry.setup import configure
from orchmem.worker.api.bodies import BODY_MODELS
from orchmem.worker.api.errors import error_body, error_response, json_error
from orchmem.worker.api.middleware import AccessLog, BodyLimit, Traced
from orchmem.worker.api.routes import router
from orchmem.worker.api.state import ApiState
from orchmem.worker.api.tokens import TokenStore
from orchmem.worker.console.mount import mount as mount_console

logger = logging.getLogger(__name__)


def create_api(settings: Settings, store: TokenStore | None = None) -> FastAPI:
    """The ASGI app for ``settings`` (tokens from ``store``, default the root's)."""
    app = FastAPI(title="orchmem", version=version("orchmem"), docs_url=None,
                  redoc_url=None, openapi_url="/openapi.json",
                  description="Long-term memory for agent orchestrators. Every path under "
                  "/v1/orchestrators/{orchestratorId}/ needs `Authorization: Bearer "
                  "<token>` for that orchestrator (`orchmem token create --orch ID`).")
    app.state.orchmem = ApiState(settings, store)
    mount_console(app)  # /console: before the API's catch-all routes
    app.include_router(router)
    app.add_api_route("/v1/health", health, methods=["GET"], tags=["service"],
                      summary="Liveness: no token needed")
    app.add_exception_handler(OrchmemError, _orchmem_error)
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal)
    app.add_middleware(BodyLimit, max_bytes=settings.api.max_body_bytes)
    app.add_middleware(AccessLog)
    configure(settings.telemetry)
    app.add_middleware(Traced)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


async def health() -> dict[str, Any]:
    """Liveness, answered on the event loop: it needs no thread, whatever the load."""
    return {"ok": True, "service": "orchmem", "version": version("orchmem")}


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the request body models the handlers validate themselves
    (with the same models the worker uses)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version,
                             description=app.description, routes=app.routes)
        _, defs = models_json_schema([(m, "validation") for m in (WritebackRequest,
                                                                   *BODY_MODELS)],
                                     by_alias=True, ref_template="#/components/schemas/{model}")
        schema.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
        schema["components"]["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer"}}
        app.openapi_schema = schema
    return app.openapi_schema


async def _orchmem_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OrchmemError)
    return error_response(exc)


async def _request_invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [{"path": ".".join(str(p) for p in e.get("loc", ())),
               "message": str(e.get("msg", "invalid"))} for e in exc.errors()]
    summary = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5])
    return error_response(MemoryValidationError(f"invalid request: {summary}", errors))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code,
                                                              f"http_{exc.status_code}")
    return json_error(exc.status_code, error_body(code, str(exc.detail)))


async def _internal(request: Request, exc: Exception) -> Response:
    logger.error("api: %s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse(error_body("internal", "internal error (logged on the server)"),
                        status_code=500)
