"""The client's reflection and review methods (mixed into ``MemoryClient``).

    client.reflect().wait(60)                    # topics, proposals, crystals, working.md
    for p in client.proposals():                 # pending evolves proposals
        client.accept(p["proposalId"])           # or client.reject(id, reason="...")
    print(client.working_memory())               # memory/bulletins/working.md

Writes go through the orchestrator's queue like every write (``reflect`` and ``review``
tasks); the reads open the SQLite file or the projection file directly.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from orchmem.config import OrchmemError
from orchmem.models.bulletin import working
from orchmem.models.core.shapes import validate_with
from orchmem.models.reflection.review import REVIEW_ADAPTER
from orchmem.models.storage.reflection.insights import list_proposals
from orchmem.tasks.reflect import REFLECT, REVIEW
from orchmem.worker.client.handles import WriteHandle

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchmem.models.storage.db.database import Databases


class ReflectionMixin:
    """``reflect``, ``proposals``, ``accept``, ``reject``, ``working_memory``."""

    orchestrator_id: str
    databases: Databases

    if TYPE_CHECKING:  # provided by MemoryClient
        def _publish(self, task: str, kind: str, payload: dict[str, Any], *,
                     expires_s: float | None = None,
                     check: Callable[[dict[str, Any]], object] | None = None
                     ) -> WriteHandle: ...

        def _warn(self, what: str, exc: BaseException) -> str: ...

    def reflect(self) -> WriteHandle:
        """Publish a reflection now (also run by beat where memory changed). Returns a
        :class:`WriteHandle`; ``handle.wait()`` gives its counts (tasks/reflect.py)."""
        return self._publish(REFLECT, "reflect", {"idempotencyKey": f"reflect-{uuid.uuid4().hex}"})

    def proposals(self, status: str | None = "pending",
                  limit: int = 100) -> list[dict[str, Any]]:
        """Evolves proposals as JSON, newest first (``status`` None: any); empty (and
        logged) when memory cannot be read."""
        try:
            odb = self.databases.open(self.orchestrator_id, create=False)
            return [] if odb is None else [p.to_dict() for p in list_proposals(odb, status, limit)]
        except OrchmemError as exc:
            self._warn("proposals", exc)
            return []

    def _review(self, payload: dict[str, Any]) -> WriteHandle:
        # A fresh key per call: accepting twice is a second request, refused by the
        # worker ("already accepted"), not a replay of the first one's answer.
        payload = {"idempotencyKey": f"review-{uuid.uuid4().hex}",
                   **{k: v for k, v in payload.items() if v is not None}}
        workspace = self.databases.workspace(self.orchestrator_id)
        return self._publish(REVIEW, "review", payload, check=lambda p: validate_with(
            REVIEW_ADAPTER, p, workspace=workspace, name="review"))

    def accept(self, proposal_id: str, *, reason: str | None = None
               ) -> WriteHandle:
        """Accept a proposal (``replaces``/``challenges`` supersede the older memory).
        Never raises; the worker's refusal (unknown, already decided, memories gone) is
        in ``handle.wait()``'s result."""
        return self._review({"op": "accept", "proposalId": proposal_id,
                                              "reason": reason})

    def reject(self, proposal_id: str, *, reason: str | None = None
               ) -> WriteHandle:
        """Reject a proposal: it is kept as rejected and never proposed again."""
        return self._review({"op": "reject", "proposalId": proposal_id,
                                              "reason": reason})

    def working_memory(self) -> str | None:
        """The text of working.md (None until the first reflection wrote it)."""
        return working.read(self.databases.workspace(self.orchestrator_id).bulletins_dir)
