"""Read-your-writes: the writes a client published and has not yet seen committed.

A recall waits, a bounded time, until this client's earlier writes have a final
receipt in SQLite, so a message recalls what the previous message wrote. Each write is
waited for at most ``memory.retrieval.read_your_writes_timeout_s`` after it was
published, whatever the number of recalls: during a worker outage the first recall
waits and the next ones do not (the writes stay in the outbox and land later). One
query a poll, for every pending key; the poll slows from 20 ms to 250 ms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orchmem.config import OrchmemError
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.delivery import receipts

if TYPE_CHECKING:
    import anyio

#: How often a wait first looks at the receipts of pending writes, and the slowest.
POLL_S = 0.02
MAX_POLL_S = 0.25
#: Pending writes remembered; the oldest are dropped past it.
MAX_PENDING = 10_000


class PendingWrites:
    """One client's published, not yet committed writes: key -> until when to wait."""

    def __init__(self, databases: Databases, orchestrator_id: str, timeout_s: float,
                 warn: Callable[[str, BaseException], Any],
                 log: Callable[..., None]) -> None:
        self.databases = databases
        self.orchestrator_id = orchestrator_id
        self.timeout_s = timeout_s
        self._warn = warn
        self._log = log
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def track(self, key: str) -> None:
        """Remember a published write, for ``timeout_s`` from now."""
        with self._lock:
            self._until[key] = time.monotonic() + self.timeout_s
            while len(self._until) > MAX_PENDING:
                self._until.pop(next(iter(self._until)))

    def keys(self) -> list[str]:
        """The writes still waited for (those past their limit are dropped)."""
        now = time.monotonic()
        with self._lock:
            for key in [k for k, until in self._until.items() if until <= now]:
                del self._until[key]
            return list(self._until)

    def settle(self, keys: set[str]) -> None:
        """Forget writes known committed (a reader worker saw their receipts)."""
        with self._lock:
            for key in keys:
                self._until.pop(key, None)

    def wait(self, timeout: float | None = None) -> list[str]:
        """Wait until every tracked write is committed or given up on, at most
        ``timeout`` seconds (default ``timeout_s``); returns the keys not committed."""
        deadline = time.monotonic() + (self.timeout_s if timeout is None else timeout)
        pause = POLL_S
        unfinished: set[str] = set()
        while True:
            sleep = self._step(unfinished, *self._poll(), deadline, pause)
            if sleep is None:
                return sorted(unfinished)
            time.sleep(sleep)
            pause = min(pause * 2, MAX_POLL_S)

    async def wait_async(self, timeout: float | None = None,
                         limiter: anyio.CapacityLimiter | None = None) -> list[str]:
        """:meth:`wait` for an event loop: each poll's read runs in a thread of
        ``limiter``'s pool (it reads every pending key's receipt), and no thread is held
        between polls."""
        import anyio.to_thread  # the synchronous client does without it

        if not self.keys():
            return []
        deadline = time.monotonic() + (self.timeout_s if timeout is None else timeout)
        pause = POLL_S
        unfinished: set[str] = set()
        while True:
            polled = await anyio.to_thread.run_sync(self._poll, limiter=limiter)
            sleep = self._step(unfinished, *polled, deadline, pause)
            if sleep is None:
                return sorted(unfinished)
            await anyio.sleep(sleep)
            pause = min(pause * 2, MAX_POLL_S)

    @staticmethod
    def _step(unfinished: set[str], left: dict[str, float], done: set[str],
              deadline: float, pause: float) -> float | None:
        """Add one poll to ``unfinished`` (in place); the next pause, or None when the
        wait is over (nothing left within its limit, or the deadline passed)."""
        unfinished |= set(left)
        unfinished -= done
        now = time.monotonic()
        if not any(until > now for until in left.values()) or now >= deadline:
            return None
        return min(pause, deadline - now)

    def _poll(self) -> tuple[dict[str, float], set[str]]:
        """The keys still pending (with their wait limits) and those now committed;
        forgets the committed ones and those past their limit."""
        with self._lock:
            pending = dict(self._until)
        if not pending:
            return {}, set()
        try:
            odb = self.databases.open(self.orchestrator_id, create=False)
            done = receipts.final_keys(odb, list(pending)) if odb is not None else set()
        except OrchmemError as exc:
            self._warn("receipts not read", exc)
            done = set()
        now = time.monotonic()
        given_up = {k for k, until in pending.items() if until <= now and k not in done}
        if given_up:
            self._log("read_your_writes_given_up", keys=len(given_up))
        with self._lock:
            for key in done | given_up:
                self._until.pop(key, None)
        return {k: v for k, v in pending.items() if k not in done}, done
