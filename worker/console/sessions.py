"""Console sessions: a random id in an HttpOnly, SameSite=Strict cookie (Secure over
TLS), kept in this process's memory, each bound to the orchestrator of the API token
the user logged in with and carrying its own CSRF token.

The token itself is not kept: each request checks that the token's id is still in the
token store (a revoked token ends its sessions at the next click). A session idle for
:data:`IDLE_S` ends.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

#: The session cookie, and the one that carries the login form's CSRF value.
COOKIE = "orchmem_console"
LOGIN_COOKIE = "orchmem_console_login"
#: A session unused this long ends.
IDLE_S = 8 * 3600
#: Most sessions kept at once (the oldest go first).
MAX_SESSIONS = 1000


@dataclass
class Session:
    """One logged-in browser."""

    sid: str
    orchestrator_id: str
    token_id: str
    csrf: str
    seen: float = field(default_factory=time.monotonic)
    #: The purpose stated to see restricted memories (None: they stay hidden).
    purpose: str | None = None


class Sessions:
    """The sessions of one server (thread-safe)."""

    def __init__(self, idle_s: float = IDLE_S) -> None:
        self.idle_s = idle_s
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def open(self, orchestrator_id: str, token_id: str) -> Session:
        """A new session for a token just verified."""
        session = Session(secrets.token_urlsafe(32), orchestrator_id, token_id,
                          secrets.token_urlsafe(32))
        with self._lock:
            if len(self._by_id) >= MAX_SESSIONS:
                oldest = min(self._by_id.values(), key=lambda s: s.seen)
                self._by_id.pop(oldest.sid, None)
            self._by_id[session.sid] = session
        return session

    def find(self, sid: str | None) -> Session | None:
        """The live session of cookie value ``sid``, or None (unknown or idle too long)."""
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._by_id.get(sid)
            if session is None:
                return None
            if now - session.seen > self.idle_s:
                self._by_id.pop(sid, None)
                return None
            session.seen = now
            return session

    def close(self, sid: str) -> None:
        with self._lock:
            self._by_id.pop(sid, None)


def same(a: str | None, b: str | None) -> bool:
    """Constant-time equality of two secrets (a missing one is never equal)."""
    return bool(a) and bool(b) and hmac.compare_digest(str(a), str(b))
