"""The console's defences: response headers, form parsing, CSRF checks, refusals.

Every console response carries a strict Content-Security-Policy (only this server's
stylesheet and script, no inline script or style, no framing, forms posting only
here), ``X-Frame-Options: DENY``, ``nosniff``, no referrer and ``no-store``. Every
state-changing form carries the session's CSRF token; a POST without it, or with
another, is refused 403 before anything is read or written.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchmem.worker.console.sessions import Session, same

PREFIX = "/console"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"),
           (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
           (b"cache-control", b"no-store")]
#: Longest form body read (a memory's content is the largest field).
MAX_FORM_BYTES = 256 * 1024


class Refused(Exception):
    """A console request refused: shown as a page with ``status`` and ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LoginNeeded(Exception):
    """No live session: the browser is sent to the login page."""


class ConsoleHeaders:
    """Add :data:`HEADERS` to every response under ``/console``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(PREFIX):
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k not in names]
                message = {**message, "headers": [*kept, *HEADERS]}
            await send(message)

        await self.app(scope, receive, sending)


async def form(request: Request) -> dict[str, str]:
    """The urlencoded body of a form (first value of each field)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise Refused(413, "the form is too large")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "the form could not be read") from None
    return {k: v[0] for k, v in fields.items()}


def check_csrf(session: Session, fields: dict[str, str]) -> None:
    """Refuse (403) a form whose ``csrf`` field is not the session's token."""
    if not same(fields.get("csrf"), session.csrf):
        raise Refused(403, "the form's CSRF token is missing or wrong: reload the page "
                      "and try again")


def is_tls(request: Request) -> bool:
    """Whether the browser reached this server over TLS (the cookie is then Secure)."""
    return request.url.scheme == "https"
