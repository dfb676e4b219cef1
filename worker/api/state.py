"""What the HTTP API keeps between requests: the token guard, one client per
orchestrator, the count of each orchestrator's requests in progress (capped, so one
tenant cannot take every thread) and the separate pool writes are checked and published
in (they wait for the worker on the event loop, :mod:`orchmem.worker.client.write_wait`).

In the default mode each orchestrator's :class:`MemoryClient` publishes to the broker
and reads the SQLite file (the server runs on the host that owns the files). With
``api.immediate`` the clients run the tasks in this process (no broker, no worker):
writes of one orchestrator are then serialised by a lock, as a shard's single worker
would.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import anyio

from orchmem.config import Settings
from orchmem.models.storage.db.database import Databases
from orchmem.worker.api.auth import Guard
from orchmem.worker.api.errors import TooManyRequests
from orchmem.worker.api.tokens import TokenStore
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import OrchmemCelery, create_immediate_app


class ApiState:
    """The server's shared objects; thread-safe (handlers run in a thread pool)."""

    def __init__(self, settings: Settings, store: TokenStore | None = None) -> None:
        self.settings = settings
        self.immediate = settings.api.immediate
        self.databases = Databases(settings, readonly=not self.immediate)
        self.guard = Guard(store or TokenStore(settings), self.databases)
        self._clients: dict[str, MemoryClient] = {}
        self._write_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._immediate_app: OrchmemCelery | None = None
        #: Requests in progress per orchestrator, capped at max_requests_per_orchestrator.
        self._in_flight: dict[str, int] = {}
        #: The pool writes are checked and published in, apart from the one that serves
        #: reads (a write's wait for the worker holds no thread).
        self.write_limiter = anyio.CapacityLimiter(settings.api.write_threads)

    def enter(self, orchestrator_id: str) -> None:
        """Count a request of ``orchestrator_id`` in; TooManyRequests past the cap."""
        cap = self.settings.api.max_requests_per_orchestrator
        with self._lock:
            count = self._in_flight.get(orchestrator_id, 0)
            if count >= cap:
                raise TooManyRequests(
                    f"orchestrator {orchestrator_id!r} has {cap} requests in progress "
                    "(api.max_requests_per_orchestrator); retry when one has answered")
            self._in_flight[orchestrator_id] = count + 1

    def leave(self, orchestrator_id: str) -> None:
        """Count a request of ``orchestrator_id`` out."""
        with self._lock:
            count = self._in_flight.get(orchestrator_id, 0) - 1
            if count > 0:
                self._in_flight[orchestrator_id] = count
            else:
                self._in_flight.pop(orchestrator_id, None)

    def in_flight(self, orchestrator_id: str) -> int:
        """Requests of ``orchestrator_id`` in progress now."""
        with self._lock:
            return self._in_flight.get(orchestrator_id, 0)

    def client(self, orchestrator_id: str) -> MemoryClient:
        """The client of an admitted orchestrator (created on first use)."""
        with self._lock:
            client = self._clients.get(orchestrator_id)
            if client is None:
                client = MemoryClient(orchestrator_id, self.settings, app=self._app(),
                                      databases=self.databases, immediate=self.immediate)
                self._clients[orchestrator_id] = client
                self._write_locks[orchestrator_id] = threading.Lock()
            return client

    def drop(self, orchestrator_id: str) -> None:
        """Forget the client of an orchestrator that no longer exists."""
        with self._lock:
            self._clients.pop(orchestrator_id, None)

    def _app(self) -> OrchmemCelery | None:
        # With a broker each client builds its own app (it rebuilds it after an outage).
        if self.immediate and self._immediate_app is None:
            self._immediate_app = create_immediate_app(self.settings, self.databases)
        return self._immediate_app

    @contextlib.contextmanager
    def writing(self, orchestrator_id: str) -> Iterator[None]:
        """Serialise in-process writes of one orchestrator (immediate mode only)."""
        if not self.immediate:
            yield
            return
        with self._lock:
            lock = self._write_locks.setdefault(orchestrator_id, threading.Lock())
        with lock:
            yield
