"""Degraded mode: an orchestrator whose migration failed keeps a read-only memory.

After a failed migration (migrations.py) the file is restored from the backup taken just
before, and ``memory/DEGRADED.json`` records why. While it is there recall and the
bulletin work, and every write transaction is refused with :class:`MemoryDegraded`
(the client's outbox keeps the write: it has no receipt, so the reconciler publishes it
again later). ``orchmem migrate`` removes the marker and tries again; ``orchmem stats``
and ``orchmem check`` show it.
"""

from __future__ import annotations

import json
from typing import Any

from orchmem.config import MemoryDegraded
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.workspace.folders import Workspace
from orchmem.models.workspace.private import write_private


def degraded_info(workspace: Workspace) -> dict[str, Any] | None:
    """The marker's content, or None when memory is not degraded."""
    try:
        text = workspace.degraded_marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"reason": f"unreadable marker: {exc}"}
    try:
        info = json.loads(text)
    except ValueError:
        return {"reason": "unreadable marker"}
    return info if isinstance(info, dict) else {"reason": "unreadable marker"}


def check_not_degraded(workspace: Workspace) -> None:
    """Raise MemoryDegraded when the marker is there (before any write)."""
    info = degraded_info(workspace)
    if info is not None:
        raise MemoryDegraded(
            f"memory of orchestrator {workspace.orchestrator_id!r} is read-only: "
            f"{info.get('reason', 'unknown reason')}. Recall and the bulletin still work; "
            "this write stays in the outbox. Fix the cause, then run "
            f"`orchmem migrate --orch {workspace.orchestrator_id}`")


def mark_degraded(workspace: Workspace, reason: str, **details: Any) -> None:
    info = {"reason": reason, "at": format_ts(utc_now()), **details}
    tmp = workspace.degraded_marker.with_suffix(".tmp")
    write_private(tmp, json.dumps(info, indent=2))
    tmp.replace(workspace.degraded_marker)


def clear_degraded(workspace: Workspace) -> bool:
    """Remove the marker; True when there was one."""
    try:
        workspace.degraded_marker.unlink()
    except FileNotFoundError:
        return False
    return True
