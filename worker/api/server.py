"""uvicorn for the HTTP API: its connection timeouts from ``api.*`` settings.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` but sets no
limit on how long a client takes to send a request's headers: a connection that opens
and sends nothing, or trickles half a header, is held forever. :class:`HeaderTimeout`
closes it after ``api.header_timeout_s``, counted from the opening and again from each
response.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from orchmem.config import Settings


class HeaderTimeout(H11Protocol):
    """h11 with a deadline for each request's headers (``header_timeout_s``)."""

    header_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def _arm(self) -> None:
        """Close the connection unless a new request's headers arrive in time."""
        armed = self.cycle
        self.loop.call_later(self.header_timeout_s, self._expire, armed)

    def _expire(self, armed: Any) -> None:
        if self.cycle is armed and not self.transport.is_closing():
            self.transport.close()  # no (new) request's headers came


def server_config(app: Any, settings: Settings, **extra: Any) -> uvicorn.Config:
    """The uvicorn config serving ``app`` with ``settings.api``'s address and timeouts."""
    api = settings.api
    protocol = type("HeaderTimeout", (HeaderTimeout,), {"header_timeout_s": api.header_timeout_s})
    options: dict[str, Any] = {"host": api.address, "port": api.port, "access_log": False,
                               "log_level": "info", "server_header": False}
    return uvicorn.Config(app, **{**options, **extra}, http=protocol,
                          timeout_keep_alive=api.keep_alive_s)
