"""Who is looking: the logged-in session, its orchestrator's client and its view.

A request is served only with a live session whose API token is still in the token
store and whose orchestrator still exists; it is counted against the orchestrator's
cap on requests in progress, as an API request is (``api.max_requests_per_orchestrator``:
past it, 429). Reads go through :meth:`Visitor.view`, the one visibility rule
(models/storage/visibility.py): restricted memories only once the user stated a
purpose, and every restricted read is audited with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Annotated

import anyio.to_thread
from fastapi import Depends, Request

from orchmem.models.storage.visibility import View, make_view
from orchmem.worker.api.errors import TooManyRequests
from orchmem.worker.api.state import ApiState
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.console.security import LoginNeeded, Refused
from orchmem.worker.console.sessions import COOKIE, Session, Sessions


@dataclass
class Visitor:
    """A request of a logged-in user."""

    session: Session
    client: MemoryClient
    state: ApiState

    @property
    def orchestrator_id(self) -> str:
        return self.session.orchestrator_id

    @property
    def purpose(self) -> str | None:
        return self.session.purpose

    def view(self, session_id: str | None = None, project_id: str | None = None,
             tags: Sequence[str] = ()) -> View:
        """The checked view of this user (restricted memories once a purpose is stated)."""
        return make_view(session_id or None, project_id or None, list(tags),
                         include_restricted=self.purpose is not None, purpose=self.purpose)

    @property
    def requester(self) -> str:
        """Who restricted reads are audited as."""
        return f"console:{self.session.token_id}"


def sessions_of(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.console_sessions
    return sessions


def live_session(request: Request) -> Session:
    """The request's session, its token still valid; else LoginNeeded."""
    sessions = sessions_of(request)
    session = sessions.find(request.cookies.get(COOKIE))
    if session is None:
        raise LoginNeeded()
    state: ApiState = request.app.state.orchmem
    valid = any(r.token_id == session.token_id and r.orchestrator_id == session.orchestrator_id
                for r in state.guard.store.records())
    folder = state.databases.workspace(session.orchestrator_id).memory_dir
    if not valid or not folder.is_dir():
        sessions.close(session.sid)
        raise LoginNeeded()
    return session


async def visitor(request: Request) -> AsyncIterator[Visitor]:
    """The dependency of every page and form: a live session, counted in."""
    session = live_session(request)
    state: ApiState = request.app.state.orchmem
    try:
        state.enter(session.orchestrator_id)
    except TooManyRequests as exc:
        raise Refused(429, str(exc)) from None
    try:
        client = await anyio.to_thread.run_sync(state.client, session.orchestrator_id)
        yield Visitor(session, client, state)
    finally:
        state.leave(session.orchestrator_id)


Seen = Annotated[Visitor, Depends(visitor)]
