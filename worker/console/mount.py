"""Mount the console on the API app: its routes, its sessions, its headers, its assets."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import RedirectResponse, Response

from orchmem.worker.console import activity, explorer, login, memories, memory, review
from orchmem.worker.console.layout import page
from orchmem.worker.console.markup import render
from orchmem.worker.console.security import ConsoleHeaders, LoginNeeded, Refused
from orchmem.worker.console.sessions import Sessions

#: The assets of static/, with their content types (nothing else is served).
ASSETS = {"console.css": "text/css; charset=utf-8",
          "console.js": "text/javascript; charset=utf-8"}
assets = APIRouter(prefix="/console/static", include_in_schema=False)


@assets.get("/{name}")
def asset(name: str) -> Response:
    kind = ASSETS.get(name)
    if kind is None:
        return Response("not found", status_code=404, media_type="text/plain")
    body = files("orchmem.worker.console").joinpath("static", name).read_bytes()
    return Response(body, media_type=kind, headers={"cache-control": "max-age=3600"})


async def _login_needed(request: Request, exc: Exception) -> Response:
    return RedirectResponse("/console/login", status_code=303)


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    body = render("<p class=\"warning\" role=\"alert\">{m}</p><p><a href=\"/console/\">"
                  "Back to the console</a></p>", m=exc.message)
    return page("Refused" if exc.status >= 400 else "Not yet", body, status=exc.status)


def mount(app: FastAPI) -> None:
    """Serve the console under ``/console`` of ``app`` (the HTTP API's app)."""
    app.state.console_sessions = Sessions()
    for module in (login, activity, memories, memory, explorer, review):
        app.include_router(module.router)
    app.include_router(assets)
    app.add_exception_handler(LoginNeeded, _login_needed)
    app.add_exception_handler(Refused, _refused)
    app.add_middleware(ConsoleHeaders)
