"""What the client's calls return: a write's handle, a bulletin, a prompt context.

A write that is refused before it is published (invalid, memory disabled, broker down)
says so at once: ``ok`` is False, ``error`` is a stable code (``validation``,
``disabled``, ``broker_unavailable``, ``scope_violation``, ``storage``…), ``message``
says why in words and, for ``validation``, ``errors`` lists each field path. A task's
result (``handle.wait()``) uses the same three keys when it fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from orchmem.config import OrchmemError
from orchmem.models.recall.bundle import RecallBundle, Scores

if TYPE_CHECKING:
    from orchmem.models.core.shapes import MemoryNode
    from orchmem.worker.client.memory_client import MemoryClient


@dataclass
class WriteHandle:
    """A write. ``ok`` is False when it was not published now (see ``error``, the code,
    and ``message``); ``outboxed`` then says it is recorded in the outbox and will be
    published by the reconciler when the broker is back (nothing is lost)."""

    orchestrator_id: str
    key: str
    task_id: str | None
    ok: bool
    #: A stable code when ``ok`` is False: ``validation``, ``disabled``, ``broker_unavailable``…
    error: str | None = None
    message: str | None = None
    #: For ``validation``: ``[{"path": "memories.0.type", "message": ...}, ...]``.
    errors: list[dict[str, str]] = field(default_factory=list)
    _client: MemoryClient | None = field(default=None, repr=False)
    outboxed: bool = False
    _async: Any = field(default=None, repr=False)

    @classmethod
    def refused(cls, orchestrator_id: str, key: str, exc: OrchmemError, message: str,
                **more: Any) -> WriteHandle:
        """A handle for a write refused with ``exc`` (its code and field errors)."""
        errors = exc.to_dict().get("errors", [])
        return cls(orchestrator_id, key, None, False, exc.code, message, list(errors), **more)

    def done(self) -> bool:
        """True once the worker committed (or refused) it: read from SQLite, the truth."""
        return self._client is not None and self._client.results.receipt_final(self.key)

    def poll_only(self) -> None:
        """Say that this write's result will be polled (:meth:`done`, :meth:`result_now`)
        rather than waited for: the result store stops pushing it to this process (Celery
        subscribes to it at publish, and reads what was pushed only while a :meth:`wait`
        blocks), and replies pushed before are read off the connection, so none pile up
        unread. :meth:`wait` still works after it."""
        if self.ok and self._client is not None:
            self._client.results.poll_only(self)

    def result_now(self) -> tuple[bool, dict[str, Any] | None]:
        """Without waiting: ``(True, result)`` once the result store has the task's
        result (``result`` as :meth:`wait` gives it; None when it could not be read),
        else ``(False, None)``. A round trip to the result store (Redis), unlike
        :meth:`done`; async code runs it in a thread (see :mod:`.write_wait`)."""
        if not self.ok or self._client is None:
            return True, None
        return self._client.results.result_now(self)

    def wait(self, timeout: float = 30.0) -> dict[str, Any] | None:
        """The task's result, or None if it did not finish within ``timeout`` seconds.

        A failed task gives ``{"ok": False, "error": code, "message": ..., "errors": [...]}``.
        """
        if not self.ok or self._client is None:
            return None
        return self._client.results.result(self, timeout)


def task_result(value: Any) -> dict[str, Any] | None:
    """A task's outcome as the client reports it: the result dict, with a failure
    always flat (``error`` a code, ``message``, and ``errors`` for ``validation``)."""
    if isinstance(value, OrchmemError):
        return {"ok": False, "errors": [], **value.to_dict()}
    if isinstance(value, BaseException):
        return {"ok": False, "error": "internal", "errors": [],
                "message": f"{type(value).__name__}: {value}"}
    if not isinstance(value, dict):
        return None
    result = dict(value)
    nested = result.get("error")
    if isinstance(nested, dict):  # a stored receipt: {"error": {"error": code, ...}}
        result.update({"errors": [], **nested})
    elif result.get("ok") is False:
        result.setdefault("errors", [])
    return result


def found_by(scores: Scores) -> str:
    """How a recalled memory was found, in words: "vector #2, full text #1", or "next to
    a hit" for a memory the router's expansion added (beside a hit in its conversation
    or linked to one), "said in the asked days" for one only the router's dated list
    found."""
    if not scores.vector_rank and not scores.text_rank:
        return ("said in the asked days" if scores.rrf > 0 else
                "next to a hit (same conversation or linked)")
    parts = [f"vector #{scores.vector_rank}" if scores.vector_rank else "not found by vector",
             f"full text #{scores.text_rank}" if scores.text_rank else
             "not found by full text"]
    return ", ".join(parts)


@dataclass
class BulletinResult:
    """The bulletin for this message: ``source`` is live, snapshot (fallback) or empty."""

    bulletin: dict[str, Any]
    text: str
    source: Literal["live", "snapshot", "empty"]
    warnings: list[str] = field(default_factory=list)

    @property
    def fresh(self) -> bool:
        return self.source == "live"


@dataclass
class Context:
    """The text block for a prompt, and what it was made of."""

    purpose: str
    text: str
    bulletin: BulletinResult
    bundle: RecallBundle
    warnings: list[str] = field(default_factory=list)
    #: The memories of the always-injected tiers, first in the block (procedural).
    always: list[MemoryNode] = field(default_factory=list)
    #: The tiers recalled for the query, and why the on-request ones joined (or None).
    tiers: tuple[str, ...] = ()
    tiers_reason: str | None = None
