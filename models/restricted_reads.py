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

from .storage.database import OrchestratorDB
from .storage.visibility import View

MAX_PURPOSE_CHARS = 500


def audit_restricted_read(odb: OrchestratorDB, view: View, answer: Mapping[str, Any],
                          requester: str, purpose: str | None, query: str) -> list[str]:
    """Write the audit event of a restricted read (``view`` includes restricted memories;
    nothing otherwise): the restricted memories among ``answer["nodes"]`` and the
    restricted episodes (linking a restricted memory) among ``answer["episodes"]``.
    Returns the restricted memory ids read."""
    if not view.include_restricted:
        return []
    nodes: Sequence[Any] = answer["nodes"]
    episodes: Sequence[dict[str, Any]] = answer.get("episodes", ())
    ids = [n.memory.memory_id for n in nodes
           if getattr(n.memory.sensitivity, "value", n.memory.sensitivity) == "restricted"]
    shown = [e["episodeId"] for e in episodes if e.get("sensitivity") == "restricted"]
    odb.log.write("restricted_read", requester=requester,
                  purpose=str(purpose)[:MAX_PURPOSE_CHARS],
                  memoryIds=ids, returned=len(nodes), queryChars=len(query),
                  **({"episodeIds": shown} if shown else {}))
    return ids


def audit_restricted_get(odb: OrchestratorDB, view: View, nodes: Sequence[Any],
                         requester: str, purpose: str | None) -> list[str]:
    """The audit event of a read by id whose ``view`` includes restricted memories (none
    otherwise); returns the restricted memory ids read."""
    if not view.include_restricted:
        return []
    ids = [n.memory_id for n in nodes
           if getattr(n.sensitivity, "value", n.sensitivity) == "restricted"]
    odb.log.write("restricted_read", requester=requester,
                  purpose=str(purpose)[:MAX_PURPOSE_CHARS], memoryIds=ids,
                  returned=len(nodes), byId=True)
    return ids
