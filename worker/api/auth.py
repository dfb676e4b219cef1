"""Bearer-token admission for the HTTP API (and the MCP server's HTTP transport).

A request is admitted for orchestrator B only with a valid token bound to B. No token,
a malformed one or an unknown/revoked one is ``unauthorized`` (401). A valid token of
orchestrator A naming B is a ``scope_violation`` (403): it is logged like every other
scope violation, as ``scope_denied`` in A's memory.log (A's credential was used) and on
the process logger. B's files are never touched by a refused request. A token of an
orchestrator whose folder was removed is refused as ``not_found`` (404): the
orchestrator no longer exists.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from orchmem.config import MemoryNotFound, ScopeViolation
from orchmem.models.recall.search import deny
from orchmem.models.storage.db.database import Databases
from orchmem.worker.api.errors import Unauthorized
from orchmem.worker.api.tokens import TokenStore

logger = logging.getLogger(__name__)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


@dataclass
class Admissions:
    """Counts since start: requests admitted (they reach a handler) and refused."""

    admitted: int = 0
    unauthorized: int = 0
    denied: int = 0


class Guard:
    """Checks each request's token against the orchestrator it names."""

    def __init__(self, store: TokenStore, databases: Databases) -> None:
        self.store = store
        self.databases = databases
        self.counts = Admissions()
        self._lock = threading.Lock()

    def admit(self, authorization: str | None, orchestrator_id: str, where: str) -> str:
        """Return ``orchestrator_id`` if the token may act for it; else raise
        Unauthorized or ScopeViolation (logged). ``where`` names the operation."""
        token = bearer_token(authorization)
        record = self.store.verify(token) if token is not None else None
        if record is None:
            self._count("unauthorized")
            raise Unauthorized("a valid bearer token is required (Authorization: Bearer "
                               "<token>; create one with `orchmem token create --orch ID`)"
                               if token is None else "invalid or revoked token")
        if record.orchestrator_id != orchestrator_id:
            self._count("denied")
            raise self._deny(record.orchestrator_id, record.token_id, orchestrator_id, where)
        if not self.databases.workspace(orchestrator_id).memory_dir.is_dir():
            # its folder was removed: nothing may be served from a cache or written
            self._count("unauthorized")
            raise MemoryNotFound(f"orchestrator {orchestrator_id!r} no longer exists; its "
                                 "tokens no longer work")
        self._count("admitted")
        return orchestrator_id

    def _deny(self, owner: str, token_id: str, named: str, where: str) -> ScopeViolation:
        shown = repr(named)[:80]
        message = (f"this token belongs to orchestrator {owner!r} and may not reach "
                   f"orchestrator {shown}")
        logger.warning("api: token %s of %s refused for %s (%s)", token_id, owner, shown, where)
        return deny(self.databases, self.databases.workspace(owner), message,
                    target=shown, tokenId=token_id, via="http", operation=where)

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self.counts, what, getattr(self.counts, what) + 1)
