"""The audit of a restricted read: who read restricted memories, why, which.

``recall(..., view=View(include_restricted=True), purpose=...)`` and ``get`` with such a
view are the only reads that return restricted memories. Each such read writes one
``restricted_read`` event to the orchestrator's memory.log (requester, purpose, the
restricted memoryIds returned, the query's length, never its text or any content),
whether or not it found any.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.visibility import View

MAX_PURPOSE_CHARS = 500


def audit_restricted_read(odb: OrchestratorDB, view: View, answer: Mapping[str, Any],
                          requester: str, purpose: str | None, query: str) -> list[str]:
    """Write the audit event of a restricted read (``view`` includes restricted memories;
    nothing otherwise): the restricted memories among ``answer["nodes"]`` and the
    restricted episodes (linking a restricted memory) among ``answer["episodes"]``.
    Returns the restricted memory ids read."""
    episodes: Sequence[dict[str, Any]] = answer.get("episodes", ())
    shown = [e["episodeId"] for e in episodes if e.get("sensitivity") == "restricted"]
    return _audit(odb, view, [n.memory for n in answer["nodes"]], requester, purpose,
                  queryChars=len(query), **({"episodeIds": shown} if shown else {}))


def audit_restricted_get(odb: OrchestratorDB, view: View, nodes: Sequence[Any],
                         requester: str, purpose: str | None) -> list[str]:
    """The audit event of a read by id whose ``view`` includes restricted memories (none
    otherwise); returns the restricted memory ids read."""
    return _audit(odb, view, nodes, requester, purpose, byId=True)


def _audit(odb: OrchestratorDB, view: View, memories: Sequence[Any], requester: str,
           purpose: str | None, **more: Any) -> list[str]:
    """One ``restricted_read`` event for ``memories`` (nodes) read through ``view``."""
    if not view.include_restricted:
        return []
    ids = [m.memory_id for m in memories
           if getattr(m.sensitivity, "value", m.sensitivity) == "restricted"]
    odb.log.write("restricted_read", requester=requester,
                  purpose=str(purpose)[:MAX_PURPOSE_CHARS], memoryIds=ids,
                  returned=len(memories), **more)
    return ids
