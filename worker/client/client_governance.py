"""The governance calls of :class:`~orchmem.worker.client.memory_client.MemoryClient`: reads by id
through a view, forget by policy, patch, invalidate, recover, and a bulletin for one session or
project.

A mixin: it uses the client's ``_edit`` (check, record, publish), ``databases`` and
``orchestrator_id``. Every edit returns a :class:`WriteHandle` at once and never
raises; what the worker finds is in ``handle.wait()``'s result.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from orchmem.config import OrchmemError
from orchmem.models.bulletin.compose import build
from orchmem.models.core.shapes import MemoryNode, utc_now
from orchmem.models.governance.restricted_reads import audit_restricted_get
from orchmem.models.recall.search import check_scope
from orchmem.models.storage.memories.rows import get_nodes
from orchmem.models.storage.visibility import View, make_view
from orchmem.worker.client.handles import BulletinResult, WriteHandle

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import Databases


class GovernanceCalls:
    orchestrator_id: str
    databases: Databases

    #: The client's check-record-publish of an edit (MemoryClient._edit).
    _edit: Callable[[dict[str, Any]], WriteHandle]
    #: The client's warning of a failed read (MemoryClient._warn).
    _warn: Callable[[str, BaseException], str]

    def get(self, memory_ids: Sequence[str], *, session_id: str | None = None,
            project_id: str | None = None, include_restricted: bool = False,
            purpose: str | None = None, view: View | None = None) -> list[MemoryNode]:
        """These memories of this orchestrator (any status) that the view sees, in the
        order asked; unknown ids and those the view does not see are left out alike,
        another orchestrator's ids are denied (empty list, logged). The view is recall's
        (``session_id``, ``project_id``; restricted memories only with
        ``include_restricted=True`` and a ``purpose``, audited). A restricted read
        without a purpose raises MemoryValidationError (a bug in the caller)."""
        if view is None:
            view = make_view(session_id, project_id, None, include_restricted, purpose)
        elif view.include_restricted:
            make_view(include_restricted=True, purpose=purpose)  # a purpose, always
        try:
            check_scope(self.databases, self.orchestrator_id, self.orchestrator_id,
                        memory_ids)
            odb = self.databases.open(self.orchestrator_id, create=False)
        except Exception as exc:
            self._warn("get", exc)
            return []
        if odb is None:
            return []
        try:
            nodes = get_nodes(odb, memory_ids, view)
        except OrchmemError as exc:
            self._warn("get", exc)
            return []
        audit_restricted_get(odb, view, nodes, self.orchestrator_id, purpose)
        return nodes

    def forget_where(self, memory_ids: Sequence[str] = (), *, before: str | None = None,
                     session_id: str | None = None, project_id: str | None = None,
                     conversation_id: str | None = None, workflow_run_id: str | None = None,
                     source_path: str | None = None, tags: Sequence[str] = (),
                     hard: bool = False, dry_run: bool = False, reason: str | None = None,
                     idempotency_key: str | None = None) -> WriteHandle:
        """Forget every memory the selectors match (all must hold): ``memory_ids``,
        ``before`` (created before an ISO date or timestamp), a session, a project, a
        source (conversation, workflow run, ingested file path) and ``tags``; soft
        (retracted) unless ``hard`` (erased, as :meth:`forget` erases; a hard forget
        naming a ``workflow_run_id`` or ``conversation_id`` also erases the texts of
        that run's, or that conversation's runs', execution-log events and rebuilds
        their episodes, whether or not a memory matched).

        ``handle.wait()`` gives ``{"count": n, "memoryIds": [...], "hard", "dryRun"}``
        (a hard one adds ``"erased"``, with ``logEvents`` and ``episodes`` counts);
        with ``dry_run`` nothing changes. A forget that matches nothing gives count 0.
        """
        return self._edit({
            "op": "forget_policy", "memoryIds": list(memory_ids), "before": before,
            "sessionId": session_id, "projectId": project_id,
            "conversationId": conversation_id, "workflowRunId": workflow_run_id,
            "sourcePath": source_path, "tags": list(tags), "hard": hard, "dryRun": dry_run,
            "reason": reason,
            # each call selects afresh: a repeat must not return the first one's receipt
            "idempotencyKey": idempotency_key or f"forget-policy-{uuid.uuid4().hex}"})

    def patch(self, memory_id: str, *, reason: str | None = None,
              **fields: Any) -> WriteHandle:
        """Change ``importance``, ``confidence``, ``summary``, ``tags``, ``metadata``,
        ``tier``, ``scope`` (with ``sessionId`` / ``projectId``) or ``sensitivity`` of a
        memory in place (camelCase or snake_case names); the audit keeps before and
        after. A change of content is a :meth:`supersede`."""
        names = {"session_id": "sessionId", "project_id": "projectId"}
        return self._edit({"op": "patch", "memoryId": memory_id, "reason": reason,
                           **{names.get(k, k): v for k, v in fields.items()}})

    def invalidate(self, memory_id: str, reason: str) -> WriteHandle:
        """Mark a memory wrong (retracted, audited as ``invalidate`` with ``reason``)."""
        return self._edit({"op": "invalidate", "memoryId": memory_id, "reason": reason})

    def recover(self, memory_id: str, *, reason: str | None = None,
                wait_for_memory_s: int | None = None) -> WriteHandle:
        """Make a soft-forgotten (retracted) memory active again, audited with ``reason``.

        A hard-forgotten memory is erased: the worker refuses it with code ``erased``.
        ``wait_for_memory_s``: how long the worker waits for a memory not written yet
        (default ``worker.edit_wait_s``; 0 for an id that must exist now).
        """
        return self._edit({"op": "recover", "memoryId": memory_id, "reason": reason,
                           "waitForMemoryS": wait_for_memory_s})

    def scoped_bulletin(self, view: View) -> BulletinResult:
        """The bulletin of one session and/or project, built here from the database
        (the worker's snapshot is the global one). Raises OrchmemError."""
        odb = self.databases.open(self.orchestrator_id, create=False)
        if odb is None:
            return BulletinResult(bulletin={}, text="", source="empty",
                                  warnings=["this orchestrator has no memory yet"])
        built = build(odb, utc_now(), view)
        return BulletinResult(bulletin=built.to_dict(), text=built.to_text(), source="live")
