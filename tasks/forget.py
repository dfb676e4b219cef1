"""The steps of the hard forget's registry (models/governance/derived.py) that only a task runs: the
stored task results of the orchestrator in the result backend, the broker's append-only
file, and the bulletin snapshot (:data:`STEPS`, one per entry marked ``by_task``).

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
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

from orchmem.config import OrchmemError
from orchmem.models.bulletin.compose import SNAPSHOT_JSON, SNAPSHOT_MD
from orchmem.models.governance.derived import task_steps
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.tasks.base import MemoryTask
from orchmem.tasks.bulletin import write_bulletin

logger = logging.getLogger(__name__)

_GLOB = re.compile(r"([*?\[\]\\])")


def erase_elsewhere(task: MemoryTask, odb: OrchestratorDB) -> dict[str, Any]:
    """Run the step of every registry entry models leave to a task
    (:func:`orchmem.models.governance.derived.task_steps`). Returns ``{"bulletin": "rebuilt" |
    "none" | "deleted (…)", "results": n | "failed: …", "aofRewrite": "requested" |
    "not needed: AOF is off" | "refused: …" | "no broker (immediate mode)"}``; never
    raises."""
    client = getattr(task.app.backend, "client", None)
    broker = None if task.request.is_eager else client
    erased: dict[str, Any] = {}
    for name in task_steps():
        key, step = STEPS[name]
        erased[key] = step(task, broker, odb)
    if broker is not None:
        odb.log.write("forget_broker", **erased)
    return erased


def _results(task: MemoryTask, client: Any, odb: OrchestratorDB) -> int | str:
    if client is None:
        return 0
    return _delete_results(task, client, odb.orchestrator_id)


def _aof(task: MemoryTask, client: Any, odb: OrchestratorDB) -> str:
    return "no broker (immediate mode)" if client is None else _rewrite_aof(client)


def _bulletin(task: MemoryTask, client: Any, odb: OrchestratorDB) -> str:
    return _refresh_bulletin(odb)


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
    snapshots = [folder / SNAPSHOT_JSON, folder / SNAPSHOT_MD]
    if not any(path.exists() for path in snapshots):
        return "none"
    try:
        write_bulletin(odb)
    except (OrchmemError, OSError) as exc:
        for path in snapshots:
            path.unlink(missing_ok=True)
        return f"deleted (rebuild failed: {exc})"
    return "rebuilt"


#: The step of each registry entry run here: its name -> (the result's key, the step).
STEPS: dict[str, tuple[str, Callable[[MemoryTask, Any, OrchestratorDB], Any]]] = {
    "bulletin snapshot": ("bulletin", _bulletin),
    "task results": ("results", _results),
    "append-only file": ("aofRewrite", _aof),
}
