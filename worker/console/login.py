"""Logging in with an orchestrator's API token, logging out, stating a purpose.

The login form is protected against cross-site posts by a double-submit value: a
random value in a SameSite=Strict cookie that the form must repeat. A token that does
not verify is refused (401) and counted like an API request without a valid token.
"""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from orchmem.worker.api.state import ApiState
from orchmem.worker.console.access import Seen, live_session, sessions_of
from orchmem.worker.console.layout import page
from orchmem.worker.console.markup import Safe, hidden, render
from orchmem.worker.console.security import Refused, check_csrf, form, is_tls
from orchmem.worker.console.sessions import COOKIE, IDLE_S, LOGIN_COOKIE, same

router = APIRouter(prefix="/console", include_in_schema=False)
#: Longest purpose kept (it is written to the audit log with each restricted read).
MAX_PURPOSE = 200

LOGIN_FORM = """<form method="post" action="/console/login" class="card">{csrf}
<p>Log in with an API token of the orchestrator to inspect
(<code>orchmem token create --orch ID</code>). The console then shows that orchestrator
only.</p>
<label for="token">API token</label>
<input id="token" name="token" type="password" autocomplete="off" required autofocus>
<button type="submit">Log in</button></form>"""


def _cookie(response: Response, request: Request, name: str, value: str, age: int) -> None:
    response.set_cookie(name, value, max_age=age, path="/console", httponly=True,
                        samesite="strict", secure=is_tls(request))


@router.get("/login")
def login_page(request: Request, message: str = "") -> Response:
    value = secrets.token_urlsafe(24)
    response = page("Log in", render(LOGIN_FORM, csrf=hidden("csrf", value)),
                    flash=message[:200], status=401 if message else 200)
    _cookie(response, request, LOGIN_COOKIE, value, 3600)
    return response


@router.post("/login")
async def login(request: Request) -> Response:
    fields = await form(request)
    if not same(fields.get("csrf"), request.cookies.get(LOGIN_COOKIE)):
        raise Refused(403, "the login form expired: reload the page and try again")
    state: ApiState = request.app.state.orchmem
    record = state.guard.store.verify(fields.get("token", "").strip())
    if record is None or not state.databases.workspace(
            record.orchestrator_id).memory_dir.is_dir():
        state.guard._count("unauthorized")
        return login_page(request, "invalid or revoked token")
    session = sessions_of(request).open(record.orchestrator_id, record.token_id)
    response = RedirectResponse("/console/", status_code=303)
    _cookie(response, request, COOKIE, session.sid, IDLE_S)
    response.delete_cookie(LOGIN_COOKIE, path="/console")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    session = live_session(request)
    check_csrf(session, await form(request))
    sessions_of(request).close(session.sid)
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


@router.post("/purpose")
async def purpose(request: Request, v: Seen) -> Response:
    """State (or withdraw) the purpose for which restricted memories are shown; every
    read that then returns restricted memories is audited with it."""
    fields = await form(request)
    check_csrf(v.session, fields)
    text = " ".join(fields.get("purpose", "").split())[:MAX_PURPOSE]
    if fields.get("clear"):
        v.session.purpose = None
    elif not text:
        raise Refused(400, "purpose: say why restricted memories are needed")
    else:
        v.session.purpose = text
    back = fields.get("back", "/console/")
    return RedirectResponse(back if back.startswith("/console/") else "/console/",
                            status_code=303)


def purpose_form(v: Seen, back: str) -> Safe:
    """The form that states or withdraws the restricted purpose."""
    if v.purpose:
        return render("<form method=\"post\" action=\"/console/purpose\" class=\"inline\">"
                      "{csrf}{back}<input type=\"hidden\" name=\"clear\" value=\"1\">"
                      "<button type=\"submit\">Hide restricted memories</button></form>",
                      csrf=hidden("csrf", v.session.csrf), back=hidden("back", back))
    return render("<form method=\"post\" action=\"/console/purpose\" class=\"inline\">"
                  "{csrf}{back}<label for=\"purpose\">Purpose to show restricted memories"
                  "</label> <input id=\"purpose\" name=\"purpose\" maxlength=\"200\" required>"
                  " <button type=\"submit\">Show restricted</button></form>",
                  csrf=hidden("csrf", v.session.csrf), back=hidden("back", back))
