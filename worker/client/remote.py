"""Recall over the queue: ``MemoryClient(orchestrator_id, remote=True)``.

For an orchestrator on a host without its SQLite file. Its recall (and so
``context_for``) is sent to the shard's read queue and answered by ``orchmem reader``
on the host that owns the file; the bulletin already comes from the shard's worker.
The choice is explicit (``remote=True``): a missing file cannot tell "another host"
from "no memory yet".

Read-your-writes holds as on the local path: the request carries this client's
unfinished write keys, and the reader waits (at most
``memory.retrieval.read_your_writes_timeout_s``) for their receipts before recalling.
A reader that does not answer within that wait plus ``reader.timeout_s`` gives an empty
bundle with a warning, never a hang. The answer comes back on a list of its own
(``orchmem.reply.<uuid>``, tasks/read.py) that one ``BLPOP`` waits on and empties: it
holds memory text, so nothing of it stays in the broker once read, and an answer
nobody took expires within a minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import redis
from pydantic import ValidationError

from orchmem.config import OrchmemError
from orchmem.models.recall.bundle import RecallBundle
from orchmem.models.storage.visibility import DEFAULT_VIEW, View
from orchmem.models.workspace.folders import STORED_DATA
from orchmem.tasks.publish import send
from orchmem.tasks.read import RECALL_READ, ReaderAnswer, new_reply_key
from orchmem.worker.runtime.redis_clients import broker_client
from orchmem.worker.runtime.shards import queue_for

if TYPE_CHECKING:
    from orchmem.worker.client.memory_client import MemoryClient
    from orchmem.worker.runtime.app import OrchmemCelery


def _options(top_n: int | None, types: Sequence[str] | None, include_inactive: bool,
             memory_ids: Sequence[str] | None, view: View | None = None,
             asked: dict[str, Any] | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {"include_inactive": include_inactive}
    for name, value in (asked or {}).items():  # as_of, known_at, latest, route, episodes
        if value is not None:  # route=False means off, not the orchestrator's default
            options[name] = value.isoformat() if isinstance(value, datetime) else value
    if view is not None and view != DEFAULT_VIEW:  # a scope view (never restricted)
        options["view"] = {"sessionId": view.session_id, "projectId": view.project_id,
                           "tags": list(view.tags)}
        if view.tiers:
            options["view"]["tiers"] = list(view.tiers)
    if top_n is not None:
        options["top_n"] = top_n
    if types:
        options["types"] = list(types)
    if memory_ids:
        options["memory_ids"] = list(memory_ids)
    return options


def remote_recall(client: MemoryClient, query: str, *, top_n: int | None,
                  types: Sequence[str] | None, include_inactive: bool,
                  memory_ids: Sequence[str] | None, wait_for_writes: bool,
                  view: View | None = None, asked: dict[str, Any] | None = None
                  ) -> RecallBundle:
    """The bundle a reader worker computed for ``query``; never raises (see module).
    ``asked``: recall()'s ``as_of``, ``latest``, ``route`` and ``episodes``."""
    try:
        return ask_reader(client, query, top_n=top_n, types=types,
                          include_inactive=include_inactive, memory_ids=memory_ids,
                          wait_for_writes=wait_for_writes, view=view, asked=asked)
    except ReaderUnavailable as exc:
        return _empty(client, query, str(exc))
    except Exception as exc:
        return _empty(client, query, client._warn("remote recall", exc))


class ReaderUnavailable(OrchmemError):
    """No reader answered within the caller's timeout."""

    code = "timeout"


def ask_reader(client: MemoryClient, query: str, *, top_n: int | None = None,
               types: Sequence[str] | None = None, include_inactive: bool = False,
               memory_ids: Sequence[str] | None = None,
               wait_for_writes: bool = True, view: View | None = None,
               asked: dict[str, Any] | None = None) -> RecallBundle:
    """The bundle a reader worker computed for ``query``.

    Raises ReaderUnavailable when none answers in time, OrchmemError when it refuses.
    """
    pending = client._pending.keys() if wait_for_writes else []
    wait_s = client.memory.retrieval.read_your_writes_timeout_s if pending else 0.0
    timeout = wait_s + client.settings.reader.timeout_s
    kwargs = {"orchestrator_id": client.orchestrator_id, "query": query,
              "options": _options(top_n, types, include_inactive, memory_ids, view, asked),
              "pending": pending, "wait_s": wait_s}
    answer = _ask(client, kwargs, timeout)
    if answer is None:
        queue = queue_for(client.settings, client.orchestrator_id, RECALL_READ)
        raise ReaderUnavailable(f"no reader answered within {timeout:g}s (is `orchmem "
                                f"reader` running for queue {queue}?)")
    if not answer.ok or answer.bundle is None:
        raise OrchmemError("reader refused: "
                           f"{answer.message or answer.error or 'its answer holds no bundle'}")
    left = answer.pending
    client._pending.settle(set(pending) - set(left))
    bundle = answer.bundle
    if left:
        note = (f"{len(left)} of this client's write-backs are not committed yet; their "
                "memories may be missing")
        bundle = bundle.model_copy(update={"warnings": [*bundle.warnings, note]})
    return bundle


def _ask(client: MemoryClient, kwargs: dict[str, Any], timeout: float
         ) -> ReaderAnswer | None:
    """The reader's answer, or None when none came within ``timeout``."""
    try:
        if client.app.conf.task_always_eager:  # immediate mode: the task runs right here
            return ReaderAnswer.model_validate(
                send(client.app, RECALL_READ, kwargs).get(propagate=False),
                context=STORED_DATA)
        reply = new_reply_key()
        # No task-sent event unless readers send theirs: Flower would list every recall
        # as sent and never received.
        send(client.app, RECALL_READ, {**kwargs, "reply": reply}, expires_s=timeout,
             ignore_result=True, sent_event=client.settings.reader.task_events)
        got = _replies(client, timeout).blpop([reply], timeout=timeout)
        if got is None:
            return None
        return ReaderAnswer.model_validate_json(got[1], context=STORED_DATA)
    except redis.RedisError as exc:
        raise ReaderUnavailable(f"the broker failed while waiting for the reader: {exc}"
                                ) from exc
    except ValidationError as exc:
        raise OrchmemError(f"the reader's answer is not a recall answer "
                           f"({exc.error_count()} errors)") from exc


def _replies(client: MemoryClient, timeout: float) -> redis.Redis:
    """The client's connection for answers; its socket outlasts the longest wait."""
    cached = client._replies
    if cached is None or cached[1] < timeout:
        conn = broker_client(client.app.conf.broker_url, client.settings,
                             socket_connect_timeout=2, socket_timeout=timeout + 5)
        cached = client._replies = (conn, timeout)
    return cached[0]


#: How long `orchmem recall` listens for a running reader before recalling by itself.
READER_PING_S = 0.5


def running_reader_serves(app: OrchmemCelery, shard: int) -> bool:
    """Whether a reader (``orchmem reader``, started by ``orchmem up``) that serves
    ``shard`` answers a ping now. Its hostname names its shards:
    ``orchmem-reader0-1@host``. False when the broker cannot be reached."""
    try:
        broker_client(app.conf.broker_url, app.settings, socket_connect_timeout=1,
                      socket_timeout=1).ping()
        replies = app.control.ping(timeout=READER_PING_S) or []
    except Exception:  # no broker: the caller recalls by itself
        return False
    for reply in replies:
        for name in reply:
            prefix = name.split("@", 1)[0]
            if prefix.startswith("orchmem-reader"):
                served = prefix.removeprefix("orchmem-reader").split("-")
                if str(shard) in served:
                    return True
    return False


def _empty(client: MemoryClient, query: str, warning: str) -> RecallBundle:
    return empty_bundle(client.orchestrator_id, query, [warning])


def empty_bundle(orchestrator_id: str, query: str, warnings: list[str]) -> RecallBundle:
    """A bundle with no memories, saying why in ``warnings``."""
    return RecallBundle.model_construct(
        orchestrator_id=orchestrator_id, query=query, nodes=[], edges=[], neighbors=[],
        provenance=[], mode="hybrid", vector_available=False,
        candidates={"vector": 0, "text": 0}, warnings=warnings, took_ms=0.0)
