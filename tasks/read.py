"""Read tasks: recall answered by a reader worker on the host that owns the files.

They travel on a shard's read queue (``<prefix>.<shard>.read``), consumed by
``orchmem reader`` with several threads and read-only connections: a WAL reader never
blocks the shard's single writer, and a slow write never delays a read. Before it
recalls, the task waits (at most ``wait_s``) for the receipts of the caller's own
unfinished writes, as the local path does (read-your-writes).

The answer is plain JSON (:class:`ReaderAnswer`): ``{"ok": true, "pending": [keys
still not committed], "bundle": <RecallBundle JSON>}``, or ``{"ok": false, "error": code,
"message"}``. It goes back on the list the message names in ``reply`` (the client waits
on it with one ``BLPOP``, which also removes it; an answer nobody takes expires after
``REPLY_TTL_S``), not through Celery's result store: that costs a subscription, a
read before the write, a stored copy and a delete per recall
(docs/operations/hosts-and-shards.md#recall-over-the-queue).
The bundle is written to JSON and read back in one pass each (pydantic's own encoder
and parser), and the task's return value is then only ``{"ok", "replied"}``: nobody
reads it, and Celery formats it for its log. A message without ``reply`` (a client of
an earlier release) gets the whole answer from the result store.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from celery import shared_task
from pydantic import BaseModel

from orchmem.config import MemoryValidationError, OrchmemError
from orchmem.models.recall.bundle import RecallBundle
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.delivery import receipts
from orchmem.models.storage.visibility import make_view

logger = logging.getLogger(__name__)

RECALL_READ = "orchmem.read.recall"
#: First and slowest pause between two looks at the pending receipts.
POLL_S = 0.005
MAX_POLL_S = 0.1
#: Most pending keys one read waits for (the client keeps at most 10,000).
MAX_PENDING = 10_000
#: The only keys a reader writes an answer to: a message cannot name another key (a
#: queue, a result) for the reader to overwrite.
REPLY_KEY = re.compile(r"orchmem\.reply\.[0-9a-f]{32}")
#: Seconds an answer waits on its list for a client that gave up (it holds memory text).
REPLY_TTL_S = 60


class ReaderAnswer(BaseModel):
    """A reader's answer on the reply list: the bundle and the caller's keys still not
    committed, or why there is none (``error``: the CLI's error codes)."""

    ok: bool
    pending: list[str] = []
    bundle: RecallBundle | None = None
    error: str | None = None
    message: str | None = None
    #: A validation error's details (config/errors.py).
    errors: list[Any] | None = None


def new_reply_key() -> str:
    """A fresh key of the form :data:`REPLY_KEY` accepts, for one recall's answer."""
    return f"orchmem.reply.{uuid.uuid4().hex}"


def wait_for_receipts(databases: Databases, orchestrator_id: str, keys: list[str],
                      wait_s: float) -> list[str]:
    """Wait until every key has a final receipt, at most ``wait_s``; the keys left."""
    left = set(keys)
    deadline = time.monotonic() + max(0.0, wait_s)
    pause = POLL_S
    while left:
        odb = databases.open(orchestrator_id, create=False)
        if odb is not None:
            left -= receipts.final_keys(odb, sorted(left))
        now = time.monotonic()
        if not left or now >= deadline:
            break
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, MAX_POLL_S)
    return sorted(left)


#: What a remote recall may ask besides the query (recall()'s keyword arguments).
_OPTIONS = frozenset({"top_n", "types", "include_inactive", "memory_ids", "view", "as_of",
                      "known_at", "latest", "route", "episodes", "run_id",
                      "conversation_id", "log_after"})


def _check(pending: Any, options: Any) -> tuple[list[str], dict[str, Any]]:
    if not isinstance(pending, list) or len(pending) > MAX_PENDING or not all(
            isinstance(k, str) for k in pending):
        raise MemoryValidationError("pending: must be a list of idempotency keys")
    if not isinstance(options, dict) or set(options) - _OPTIONS:
        raise MemoryValidationError(f"options: only {', '.join(sorted(_OPTIONS))}")
    for flag in ("latest", "route", "episodes"):
        if not isinstance(options.get(flag, False), bool):
            raise MemoryValidationError(f"options.{flag}: must be true or false")
    for name in ("as_of", "known_at"):
        if not isinstance(options.get(name, ""), str):  # recall() checks the time itself
            raise MemoryValidationError(f"options.{name}: must be an ISO 8601 time")
    for name in ("run_id", "conversation_id"):
        if not isinstance(options.get(name, ""), str):  # recall() checks the id itself
            raise MemoryValidationError(f"options.{name}: must be a string")
    view = options.get("view")
    if view is not None:  # a scope view; restricted reads stay in the caller
        if not isinstance(view, dict) or set(view) - {"sessionId", "projectId", "tags",
                                                      "tiers"}:
            raise MemoryValidationError("options.view: only sessionId, projectId, tags, tiers")
        options = {**options, "view": make_view(view.get("sessionId"), view.get("projectId"),
                                                view.get("tags"), tiers=view.get("tiers"))}
    return pending, options


# No STARTED state: a recall lasts milliseconds, and each state is one more write to
# the result store and one more wake-up of the waiting client.
@shared_task(bind=True, name=RECALL_READ, acks_late=False, ignore_result=False,
             track_started=False)
def recall_read(self: Any, orchestrator_id: str, query: str, options: dict[str, Any],
                pending: list[str], wait_s: float, reply: str | None = None
                ) -> dict[str, Any]:
    """Recall for ``orchestrator_id`` after its caller's ``pending`` writes committed;
    the answer also goes to the ``reply`` list when the message names one."""
    if reply is not None and not (isinstance(reply, str) and REPLY_KEY.fullmatch(reply)):
        logger.warning("recall for %r refused: its reply key is not orchmem.reply.<32 hex> "
                       "(%d chars)", str(orchestrator_id)[:80], len(str(reply)))
        return {"ok": False, "error": "validation",
                "message": "reply: not an orchmem.reply.<32 hex> key"}
    head, bundle = _recall(self.app.databases, orchestrator_id, query, options, pending,
                           wait_s)
    if reply is None:
        return head if bundle is None else {**head, "bundle": bundle.dump()}
    answer = ReaderAnswer(**head, bundle=bundle)  # the bundle is taken as it is
    self.app.reply(reply, answer.model_dump_json(by_alias=True, exclude_none=True),
                   REPLY_TTL_S)
    return {"ok": head["ok"], "replied": True}


def _recall(databases: Databases, orchestrator_id: str, query: str, options: Any,
            pending: Any, wait_s: float) -> tuple[dict[str, Any], RecallBundle | None]:
    try:
        keys, opts = _check(pending, options)
        left = wait_for_receipts(databases, orchestrator_id, keys, float(wait_s))
        bundle = recall(orchestrator_id, query, databases=databases,
                        requester=orchestrator_id, **opts)
    except OrchmemError as exc:
        return {"ok": False, **exc.to_dict()}, None
    return {"ok": True, "pending": left}, bundle
