"""Helper threads: work a caller can hand off while it waits on something else.

Recall embeds its query on the calling thread (ONNX Runtime releases the GIL while the
model runs) and meanwhile hands what does not need the query vector (the full-text
search, its hits' rows, features and first nodes; models/recall/search.py) to a helper
thread, on the caller's own connection and inside the caller's read transaction
(``OrchestratorDB.borrowing``). A recall then takes about
max(embedding, full text) + the rest, instead of their sum.

An :class:`Overlap` is a few long-lived threads, started on first use (nothing at
import or construction), owned by the process's ``Databases`` registry and shut down
with it (``Databases.close_all``, ``MemoryClient.close``). A caller reserves a
helper before it starts (:meth:`Overlap.helper`); when every helper is busy (a
reader's threads recalling at once) it gets None and does the work itself, in order,
as before: a job never queues behind another caller's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

#: Helpers per process: one caller's side job each. Two cores gain nothing from more.
HELPERS = 2


class Helper:
    """One reserved helper thread, for the block it was reserved in."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool

    def run(self, job: Callable[[], T]) -> Future[T]:
        """``job()`` on the helper thread; its result or exception comes from the
        future. The caller must wait for it before leaving the reserving block. If the
        pool was shut down meanwhile, ``job`` runs here, now."""
        try:
            return self._pool.submit(job)
        except RuntimeError:  # shut down by another thread since the reservation
            done: Future[T] = Future()
            try:
                done.set_result(job())
            except BaseException as exc:
                done.set_exception(exc)
            return done


class Overlap:
    """At most ``threads`` helper threads, started lazily, reserved one per caller."""

    def __init__(self, threads: int = HELPERS) -> None:
        self.threads = threads
        self._slots = threading.BoundedSemaphore(threads)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    @contextmanager
    def helper(self) -> Iterator[Helper | None]:
        """A free helper for the block, or None when all are busy (do it yourself).
        Every job run on it must be finished when the block ends."""
        if not self._slots.acquire(blocking=False):
            yield None
            return
        try:
            yield Helper(self._started())
        finally:
            self._slots.release()

    def _started(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads,
                                                thread_name_prefix="orchmem-overlap")
            return self._pool

    @property
    def running(self) -> bool:
        """Whether helper threads were started and not shut down since."""
        return self._pool is not None

    def shutdown(self) -> None:
        """Let the helper threads finish their jobs and end. A later :meth:`helper`
        starts new ones."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
