"""Working memory that is fresh when it is injected (seed 004's "dirty refresh").

``MemoryClient.working_memory()`` and ``context_for(working=True)`` check working.md
before they use it (models/bulletin/working.py, ``stale_reason``): after an accepted
proposal, a forget or an invalidation, after ``memory.context.working_refresh_after``
new memories, when it is a day old or missing, they ask the orchestrator's worker to
rebuild it (task ``orchmem.working``, on the orchestrator's queue, so after this
client's earlier writes) and wait at most ``memory.context.working_refresh_timeout_s``;
past that, or when the worker cannot be asked, they use the last file and say so in a
warning. The check reads memory.db read-only; only the worker writes working.md.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from orchmem.config import OrchmemError
from orchmem.models.bulletin.working import read as read_working
from orchmem.models.bulletin.working import stale_reason
from orchmem.models.core.shapes import utc_now
from orchmem.tasks.bulletin import WORKING

if TYPE_CHECKING:
    from orchmem.worker.client.memory_client import MemoryClient


def fresh_working(client: MemoryClient) -> tuple[str | None, list[str]]:
    """working.md's text, rebuilt first when it is stale, and the warnings of a rebuild
    that did not happen in time (the last file is used then; None when there is none)."""
    folder = client.databases.workspace(client.orchestrator_id).bulletins_dir
    limits = client.memory.context
    try:
        odb = client.databases.open(client.orchestrator_id, create=False)
        reason = None if odb is None else stale_reason(odb, utc_now(),
                                                        limits.working_refresh_after)
    except OrchmemError as exc:
        return read_working(folder), [client._warn("working memory check", exc)]
    if reason is None:
        return read_working(folder), []
    timeout = limits.working_refresh_timeout_s
    handle = client._publish(WORKING, "working", {
        "idempotencyKey": f"working-{uuid.uuid4().hex}", "reason": reason},
        expires_s=max(timeout, 0.001), fresh=True)
    value = handle.wait(timeout) if handle.ok else None
    if value is not None and value.get("ok"):
        return read_working(folder), []
    why = (f"not requested: {handle.message}" if not handle.ok else
           f"not rebuilt within {timeout}s" if value is None else
           f"rebuild failed: {value.get('message')}")
    text = read_working(folder)
    warning = (f"working memory is stale ({reason}) and was {why}: "
               + ("using the last working.md" if text is not None else "none is written yet"))
    client._log("working_stale", reason=reason, why=why)
    return text, [warning]
