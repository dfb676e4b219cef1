"""What a hard forget erases outside memory.db, where only a task reaches: the stored task
results of the orchestrator in the result backend, the broker's append-only file, and
the bulletin snapshot.

- Results: every ``celery-task-meta-<orchestratorId>/*`` key is deleted (task ids are
  ``<orchestratorId>/<key>``, see :mod:`.publish`): a bulletin's result holds its text,
  and a result may hold a memory's words in other forms (summaries, proposals), so all
  of this orchestrator's go, and no other orchestrator's.
- The AOF: Redis keeps every command it was sent, the write-backs' messages included,
  until the file is rewritten; ``BGREWRITEAOF`` is asked for. A managed Redis may refuse
  it: the result says so, with Redis's answer.
- The bulletin: ``bulletins/latest.json`` and ``latest.md`` are rebuilt at once; if the
  rebuild fails they are deleted (the next bulletin writes them again).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from redis.exceptions import RedisError

from orchmem.config import OrchmemError
from orchmem.models.storage.database import OrchestratorDB

from .base import MemoryTask
from .bulletin import write_bulletin

logger = logging.getLogger(__name__)

_GLOB = re.compile(r"([*?\[\]\\])")


def erase_elsewhere(task: MemoryTask, odb: OrchestratorDB) -> dict[str, Any]:
    """Erase the orchestrator's stored results, ask for an AOF rewrite, refresh the
    bulletin snapshot. Returns ``{"results": n | "failed: …", "aofRewrite":
    "requested" | "not needed: AOF is off" | "refused: …" | "no broker (immediate
    mode)", "bulletin": "rebuilt" | "none" | "deleted (…)"}``; never raises."""
    erased: dict[str, Any] = {"bulletin": _refresh_bulletin(odb)}
    client = getattr(task.app.backend, "client", None)
    if task.request.is_eager or client is None:
        return {**erased, "results": 0, "aofRewrite": "no broker (immediate mode)"}
    erased["results"] = _delete_results(task, client, odb.orchestrator_id)
    erased["aofRewrite"] = _rewrite_aof(client)
    odb.log.write("forget_broker", **erased)
    return erased


def _delete_results(task: MemoryTask, client: Any, orchestrator_id: str) -> int | str:
    prefix = task.app.backend.get_key_for_task(_GLOB.sub(r"\\\1", orchestrator_id) + "/")
    pattern = (prefix.decode() if isinstance(prefix, bytes) else prefix) + "*"
    try:
        keys = list(client.scan_iter(match=pattern, count=500))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start:start + 500])
    except RedisError as exc:
        logger.warning("results of %s not deleted after a hard forget: %s",
                       orchestrator_id, exc)
        return f"failed: {exc}"
    return len(keys)


#: Polls, and the pause between them, for a rewrite already running to finish: its
#: snapshot may predate this forget's deletions, and Redis refuses a second one meanwhile.
REWRITE_POLLS = 100
REWRITE_POLL_S = 0.05


def _rewrite_aof(client: Any) -> str:
    try:
        for _ in range(REWRITE_POLLS):
            info = client.info("persistence")
            if not int(info.get("aof_enabled", 0)):
                return "not needed: AOF is off"
            if not int(info.get("aof_rewrite_in_progress", 0)):
                break
            time.sleep(REWRITE_POLL_S)
        client.bgrewriteaof()
    except RedisError as exc:
        return f"refused: {exc}"
    return "requested"


def _refresh_bulletin(odb: OrchestratorDB) -> str:
    folder = odb.workspace.bulletins_dir
    snapshots = [folder / "latest.json", folder / "latest.md"]
    if not any(path.exists() for path in snapshots):
        return "none"
    try:
        write_bulletin(odb)
    except (OrchmemError, OSError) as exc:
        for path in snapshots:
            path.unlink(missing_ok=True)
        return f"deleted (rebuild failed: {exc})"
    return "rebuilt"
