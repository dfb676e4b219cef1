"""``MemoryClient``: what an orchestrator imports to use its memory.

    client = MemoryClient("support-bot")
    client.write_back(transcript={"conversationId": "c1", "messages": [...]})
    bundle = client.recall("what does the user prefer?")
    block = client.context_for("selector", user_message).text

Writes go through the orchestrator's queue (asynchronous, exactly once per idempotency
key); reads open the orchestrator's SQLite file directly (synchronous, milliseconds).
A recall first waits, a bounded time, for this client's own unfinished write-backs,
so a message recalls what the previous message wrote.

The orchestrator never sees an exception from memory: with ``memory.enabled = false``,
a damaged database, a broker that is down, or a request outside this orchestrator's
scope, every call returns an empty or partial result with ``warnings`` (and the
reason is logged).

The calls, by what they do:

- writes: ``write_back``, the edits (``supersede``, ``retract``, ``link``, ``forget``,
  ``forget_where``, ``patch``, ``invalidate``, ``recover``) and ``ingest_now``; each
  returns a :class:`WriteHandle` at once and never raises, and what the worker finds
  is in ``handle.wait()``'s result;
- reads: ``recall``, ``get`` (by id, through a view), ``bulletin`` (or
  ``scoped_bulletin`` for one session or project) and ``context_for``, the prompt
  block of the bulletin and the relevant memories within a character and/or token
  budget (models/recall/context_budget.py);
- reflection and review::

      client.reflect().wait(60)                    # topics, proposals, crystals, working.md
      for p in client.proposals():                 # pending evolves proposals
          client.accept(p["proposalId"])           # or client.reject(id, reason="...")
      print(client.working_memory())               # memory/bulletins/working.md

- the execution log: ``log_event`` and ``run`` (its runs and steps are in :mod:`.runlog`).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import redis

from orchmem.config import (
    BrokerUnavailable,
    OrchmemError,
    Settings,
    check_orchestrator_id,
    load_settings,
)
from orchmem.models.bulletin.compose import Bulletin, build
from orchmem.models.bulletin.working import read as read_working
from orchmem.models.core.payloads import check_writeback, with_default_sources
from orchmem.models.core.shapes import MemoryNode, format_ts, utc_now, validate_with
from orchmem.models.execlog.rules import check_log_request, check_step_events, event_id_for
from orchmem.models.governance.edits import EDIT_ADAPTER
from orchmem.models.governance.restricted_reads import audit_restricted_get
from orchmem.models.recall.bundle import RecallBundle
from orchmem.models.recall.search import (
    check_log_after,
    check_scope,
    recall,
)
from orchmem.models.reflection.review import REVIEW_ADAPTER
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.delivery.outbox import Outbox
from orchmem.models.storage.execlog.entries import event_by_id
from orchmem.models.storage.memories.rows import get_nodes
from orchmem.models.storage.reflection.insights import list_proposals
from orchmem.models.storage.visibility import View, check_tiers, make_view, plain_id
from orchmem.models.telemetry import names
from orchmem.models.telemetry.spans import span
from orchmem.models.workspace.memlog import MemoryLog
from orchmem.tasks.bulletin import BULLETIN
from orchmem.tasks.edits import EDIT
from orchmem.tasks.execlog import LOG
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.tasks.publish import Envelope, envelope, publish, resend, send_envelope
from orchmem.tasks.reflect import REFLECT, REVIEW
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.client import checkpoints
from orchmem.worker.client.context import build_context
from orchmem.worker.client.handles import BulletinResult, Context, WriteHandle
from orchmem.worker.client.pending import PendingWrites
from orchmem.worker.client.remote import empty_bundle, remote_recall
from orchmem.worker.client.results import ResultReader
from orchmem.worker.client.runlog import Compensation, RunLog
from orchmem.worker.client.working import fresh_working
from orchmem.worker.runtime.app import OrchmemCelery, create_app, create_immediate_app
from orchmem.worker.runtime.redis_clients import broker_client

if TYPE_CHECKING:
    import anyio

logger = logging.getLogger(__name__)

#: After a failed publish, how long the client stops trying the broker.
BROKER_BACKOFF_S = 5.0
#: Outbox entries published per catch-up, after the broker answers again.
CATCH_UP_BATCH = 100

#: What a context block is for (:meth:`MemoryClient.context_for`).
Purpose = Literal["selector", "step", "diagnostics"]


class MemoryClient:
    """The memory of one orchestrator, as that orchestrator uses it.

    ``settings`` default to :func:`load_settings` (``orchmem.toml`` / ``ORCHMEM_*``).
    ``app`` and ``databases`` may be shared by several clients of one process.

    The constructor raises, for errors in the caller's set-up: ``MemoryValidationError``
    (also a ``ValueError``) when ``orchestrator_id`` does not match
    ``^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`` (it becomes a path and a queue name), and
    ``ConfigError`` when the settings (``orchmem.toml``, ``ORCHMEM_*``, or this
    orchestrator's overrides) are invalid. It opens no file and no connection.

    Reads never create the orchestrator (a name nobody wrote to answers empty, leaving
    nothing on disk); its first write does, or ``create=True`` at once.
    """

    def __init__(self, orchestrator_id: str, settings: Settings | None = None, *,
                 app: OrchmemCelery | None = None, databases: Databases | None = None,
                 immediate: bool = False, remote: bool = False,
                 create: bool = False) -> None:
        check_orchestrator_id(orchestrator_id)
        #: Recall through the shard's read queue (``orchmem reader``): see :mod:`.remote`.
        self.remote = remote
        self.orchestrator_id = orchestrator_id
        self.settings = settings or load_settings()
        self.memory = self.settings.memory_for(orchestrator_id)
        # A reader never creates or writes a file; in immediate mode the tasks write
        # through this registry, in this process.
        self.databases = databases or Databases(self.settings, readonly=not immediate)
        #: The registry is this client's to close (it was not given one).
        self._own_databases = databases is None
        #: In-process mode: tasks run here, at once, against the real file; no broker.
        self.immediate = immediate
        if immediate and app is None:
            app = create_immediate_app(self.settings, self.databases)
        self._app = app
        self._shared_app = app
        self._broker_down_until = 0.0
        self._redis: redis.Redis | None = None
        #: Remote recall's connection for answers, and the longest wait it serves.
        self._replies: tuple[redis.Redis, float] | None = None
        self.outbox = Outbox(self.databases.workspace(orchestrator_id).outbox_path,
                             self.settings.worker.busy_timeout_ms)
        self.results = ResultReader(self)
        self._pending = PendingWrites(self.databases, orchestrator_id,
                                      self.memory.retrieval.read_your_writes_timeout_s,
                                      self._warn, self._log)
        if create:
            self.create()

    def create(self) -> None:
        """Create this orchestrator's folder and memory file now, if it has none."""
        maker = Databases(self.settings) if self.databases.readonly else self.databases
        maker.open(self.orchestrator_id)
        if maker is not self.databases:
            maker.close_all()

    def close(self) -> None:
        """Stop recall's helper threads and close the database handles of the registry
        this client made (a registry passed in is its owner's to close). The client
        stays usable: a later call opens and starts what it needs again."""
        if self._own_databases:
            self.databases.close_all()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------

    @property
    def app(self) -> OrchmemCelery:
        if self._app is None:
            self._app = create_app(self.settings, client=True)
        return self._app

    def _log(self, event: str, **fields: Any) -> None:
        workspace = self.databases.workspace(self.orchestrator_id)
        if not workspace.memory_dir.is_dir():  # none before its first write (see above)
            return
        MemoryLog(workspace.log_path, self.orchestrator_id,
                  int(self.settings.memory_log_max_mb * 1024 * 1024),
                  self.settings.memory_log_backups).write(event, **fields)

    def _warn(self, what: str, exc: BaseException) -> str:
        message = f"{what}: {exc}"
        level = logging.WARNING if isinstance(exc, OrchmemError) else logging.ERROR
        logger.log(level, "memory of %s: %s", self.orchestrator_id, message,
                   exc_info=not isinstance(exc, OrchmemError))
        self._log("client_degraded", operation=what, error=type(exc).__name__,
                  message=str(exc)[:500])
        return message

    def _publish(self, task: str, kind: str, payload: dict[str, Any], *,
                 expires_s: float | None = None,
                 check: Callable[[dict[str, Any]], object] | None = None,
                 fresh: bool = False) -> WriteHandle:
        """:meth:`_publish_now` in a producer span: the parent of the worker's task span
        (the trace context travels in the message's headers: tasks/publish.py)."""
        with span(names.task_span(names.SPAN_PUBLISH, task), {
                names.MESSAGING_SYSTEM: names.MESSAGING_SYSTEM_VALUE,
                names.MESSAGING_OPERATION: "publish", names.TASK: task,
                names.ORCHESTRATOR: self.orchestrator_id}, kind="producer") as traced:
            handle = self._publish_now(task, kind, payload, expires_s=expires_s, check=check,
                                       fresh=fresh)
            traced.update({names.OUTCOME: handle.error or "published", names.KEY: handle.key,
                           names.MESSAGING_MESSAGE_ID: handle.task_id or ""})
            return handle

    def _publish_now(self, task: str, kind: str, payload: dict[str, Any], *,
                     expires_s: float | None = None,
                     check: Callable[[dict[str, Any]], object] | None = None,
                     fresh: bool = False) -> WriteHandle:
        """Check, record (durable kinds) and publish through the one publish path.

        ``fresh``: the payload's idempotency key was made for this request alone
        (:attr:`~orchmem.tasks.publish.Envelope.fresh`).
        Never raises: a payload ``check`` refuses, or one that cannot be recorded or
        sent, gives a handle with ``ok=False`` and the error's code at once.
        """
        if not self.memory.enabled:
            return WriteHandle(self.orchestrator_id, "", None, False, "disabled",
                               "memory is disabled (memory.enabled = false)")
        try:
            if check is not None:
                check(payload)
            env = replace(envelope(self.orchestrator_id, task, kind, payload), fresh=fresh)
        except OrchmemError as exc:
            return WriteHandle.refused(self.orchestrator_id, "", exc,
                                       self._warn(f"{task} refused", exc))
        if time.monotonic() < self._broker_down_until:
            return self._not_sent(env)
        try:
            result = publish(self.app, env, self.outbox, expires_s=expires_s,
                             before_send=None if self.immediate else self._ping_broker)
        except BrokerUnavailable as exc:
            return self._broker_failed(env, exc)
        except OrchmemError as exc:
            return WriteHandle.refused(self.orchestrator_id, env.key, exc,
                                       self._warn(f"{task} not recorded", exc))
        except Exception as exc:
            return self._broker_failed(env, exc)
        if env.durable and not self.immediate:
            self._catch_up(skip=env.key)
        handle = WriteHandle(self.orchestrator_id, env.key, result.id, True, _client=self,
                             _async=result)
        if env.kind not in ("bulletin", "working"):  # reads: nothing to catch up on
            self._pending.track(env.key)
        return handle

    def _not_sent(self, env: Envelope) -> WriteHandle:
        """The broker failed moments ago: keep a durable request in the outbox only."""
        kept = ""
        if env.durable:
            try:
                self.outbox.record(env.key, env.task, env.payload)
                kept = "; kept in the outbox"
            except OrchmemError as exc:
                return WriteHandle.refused(self.orchestrator_id, env.key, exc,
                                           self._warn(f"{env.task} not recorded", exc))
        return WriteHandle(self.orchestrator_id, env.key, None, False, "broker_unavailable",
                           f"{env.task} not published: the broker was unreachable moments "
                           f"ago{kept}", _client=self, outboxed=bool(kept))

    def _broker_failed(self, env: Envelope, exc: BaseException) -> WriteHandle:
        # Skip publishing for a few seconds (each attempt costs about a second), and
        # build a fresh app next time: Celery's result consumer does not recover.
        self._broker_down_until = time.monotonic() + BROKER_BACKOFF_S
        self._app = self._shared_app
        kept = "; kept in the outbox" if env.durable else ""
        return WriteHandle(self.orchestrator_id, env.key, None, False, "broker_unavailable",
                           self._warn(f"{env.task} not published{kept}", exc),
                           _client=self, outboxed=env.durable)

    def _catch_up(self, skip: str) -> None:
        """The broker answers again: publish what the outbox kept while it did not."""
        try:
            backlog = [e for e in self.outbox.never_published(limit=CATCH_UP_BATCH)
                       if e.key != skip]
        except OrchmemError as exc:
            self._warn("outbox not read", exc)
            return
        for entry in backlog:
            try:
                send_envelope(self.app, resend(self.orchestrator_id, entry.task,
                                               entry.payload))
                self.outbox.mark_published(entry.key)
            except OrchmemError:
                return  # still flaky: the reconciler takes over
        if backlog:
            self._log("outbox_caught_up", published=len(backlog))

    def _ping_broker(self) -> None:
        """Fail fast (1 s) on a dead broker, before Celery starts its own retries."""
        if self._redis is None:
            url = self.app.conf.broker_url
            self._redis = broker_client(url, self.settings, socket_connect_timeout=1,
                                        socket_timeout=1)
        try:
            self._redis.ping()
        except redis.RedisError as exc:
            self._redis = None
            raise BrokerUnavailable(f"broker unreachable: {exc}") from exc

    def wait_for_writes(self, timeout: float | None = None) -> list[str]:
        """Wait until this client's published writes are committed; returns the keys
        still pending after ``timeout`` (default
        ``memory.retrieval.read_your_writes_timeout_s``). See :mod:`.pending`."""
        return self._pending.wait(timeout)

    async def wait_for_writes_async(self, timeout: float | None = None,
                                    limiter: anyio.CapacityLimiter | None = None) -> list[str]:
        """:meth:`wait_for_writes` for an event loop: no thread is held between its
        polls, whose reads run in ``limiter``'s pool."""
        return await self._pending.wait_async(timeout, limiter)

    # -- writes -----------------------------------------------------------------

    def write_back(self, *, memories: Sequence[dict[str, Any]] | None = None,
                   edges: Sequence[dict[str, Any]] | None = None,
                   transcript: dict[str, Any] | None = None,
                   workflow_output: dict[str, Any] | None = None,
                   diagnostics: dict[str, Any] | None = None,
                   idempotency_key: str | None = None,
                   log_events: Sequence[dict[str, Any]] | None = None) -> WriteHandle:
        """Publish a write-back; returns at once with a handle (``ok`` False if refused).

        ``memories``/``edges`` as in docs/guide/client.md#explicit-memories; ``transcript`` =
        ``{"conversationId", "channel"?, "messages": [{"role", "text"}]}``;
        ``workflow_output`` = ``{"workflowRunId", "stepId", "output": text | JSON}``;
        ``diagnostics`` = ``{"runId"?, "findings": [{"severity", "text", "component"?}]}``;
        ``log_events``: the execution-log events of the step that produced it (as
        :meth:`log_event` takes them), written in the same transaction and receipt.
        """
        payload: dict[str, Any] = {}
        for name, value in (("memories", memories), ("edges", edges),
                            ("channelTranscript", transcript),
                            ("workflowOutput", workflow_output), ("diagnostics", diagnostics),
                            ("idempotencyKey", idempotency_key), ("logEvents", log_events)):
            if value is not None:
                payload[name] = list(value) if isinstance(value, list | tuple) else value
        if "memories" in payload:
            payload["memories"] = with_default_sources(payload["memories"])
        return self._publish(WRITEBACK, "wb", payload, check=self._check_writeback)

    def _check_writeback(self, payload: dict[str, Any]) -> None:
        limits = self.memory.writeback
        check_writeback(payload, self.databases.workspace(self.orchestrator_id),
                        max_memories=limits.max_memories_per_task,
                        max_content_chars=limits.max_content_chars)
        check_step_events(payload.get("logEvents"), self.orchestrator_id, self.memory.log)

    def _edit(self, payload: dict[str, Any]) -> WriteHandle:
        """Publish an edit, checked here first by the model the worker uses."""
        payload = {k: v for k, v in payload.items() if v is not None}
        workspace = self.databases.workspace(self.orchestrator_id)
        return self._publish(EDIT, "edit", payload, check=lambda p: validate_with(
            EDIT_ADAPTER, p, workspace=workspace, name="edit"))

    def supersede(self, memory_id: str, *, by: str | None = None, content: str | None = None,
                  reason: str | None = None) -> WriteHandle:
        """Replace a memory by another one (``by``, a memoryId) or by new ``content``.

        The old memory becomes ``superseded`` with an ``Updates`` edge from its
        replacement. Returns a :class:`WriteHandle` at once; never raises: a request
        that cannot be published (memory disabled, a bad idempotency key, an outbox
        that cannot be written, a broker that is down) gives ``ok=False`` with the
        reason in ``error`` (``outboxed`` says whether it will still be sent). What the
        worker finds (an unknown memory, neither or both of ``by`` and ``content``) is
        in ``handle.wait()``'s result.
        """
        return self._edit({"op": "supersede", "memoryId": memory_id, "by": by,
                           "content": content, "reason": reason})

    def retract(self, memory_id: str, reason: str) -> WriteHandle:
        """Mark a memory ``retracted`` (kept for the audit trail, left out of recall).

        Returns a :class:`WriteHandle`; never raises: a refused request gives
        ``ok=False`` with the reason in ``error`` (see :meth:`supersede`).
        """
        return self._edit({"op": "retract", "memoryId": memory_id, "reason": reason})

    def link(self, from_id: str, to_id: str, edge_type: str, *, weight: float = 1.0,
             reason: str | None = None) -> WriteHandle:
        """Add an edge ``from_id -> to_id`` of ``edge_type`` (RelatedTo, Updates,
        Contradicts, CausedBy or PartOf) with ``weight`` 0..1.

        Returns a :class:`WriteHandle`; never raises: a request that cannot be published
        gives ``ok=False`` with the reason in ``error`` (see :meth:`supersede`); an
        unknown memory or edge type, or a weight out of range, is reported by the worker
        in ``handle.wait()``'s result.
        """
        return self._edit({"op": "link", "fromMemoryId": from_id, "toMemoryId": to_id,
                           "edgeType": edge_type, "weight": weight, "reason": reason})

    def forget(self, memory_id: str, *, hard: bool = False,
               reason: str | None = None) -> WriteHandle:
        """Forget a memory: soft (``retracted``, history kept) or ``hard`` (erased).

        A hard forget empties its content and summary, deletes its vector and sources,
        strips its words from the audit trail (event subjects, edge reasons) and from
        the FTS index, and erases the finished entries of this orchestrator's outbox,
        dead letters, processed ingest files, stored results and (by an AOF rewrite) the
        broker's old messages; one tombstone remains
        (docs/guarantees.md#what-a-hard-forget-erases).
        Returns a :class:`WriteHandle`; never raises: a refused request gives
        ``ok=False`` with the reason in ``error`` (see :meth:`supersede`).
        """
        return self._edit({"op": "forget", "memoryId": memory_id, "hard": hard,
                           "reason": reason})

    def forget_where(self, memory_ids: Sequence[str] = (), *, before: str | None = None,
                     session_id: str | None = None, project_id: str | None = None,
                     conversation_id: str | None = None, workflow_run_id: str | None = None,
                     source_path: str | None = None, tags: Sequence[str] = (),
                     hard: bool = False, dry_run: bool = False, reason: str | None = None,
                     idempotency_key: str | None = None, tiers: Sequence[str] = (),
                     scope: str | None = None) -> WriteHandle:
        """Forget every memory the selectors match (all must hold): ``memory_ids``,
        ``before`` (created before an ISO date or timestamp), a session, a project, a
        source (conversation, workflow run, ingested file path), ``tags``, ``tiers`` (any
        of them) and ``scope`` (e.g. every session-scoped memory); soft
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
            "reason": reason, **({"tiers": list(tiers)} if tiers else {}),
            **({"scope": scope} if scope else {}),
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

    def ingest_now(self) -> WriteHandle:
        """Publish a scan of this orchestrator's ``memory/ingest/`` folder."""
        if not self.memory.ingest.enabled:
            return WriteHandle(self.orchestrator_id, "", None, False, "disabled",
                               "ingest is disabled (memory.ingest.enabled = false)")
        return self._publish(INGEST_SCAN, "ingest",
                             {"idempotencyKey": f"ingest-{uuid.uuid4().hex}"})

    # -- reads ------------------------------------------------------------------

    def recall(self, query: str, *, top_n: int | None = None,
               types: Sequence[str] | None = None, include_inactive: bool = False,
               memory_ids: Sequence[str] | None = None, orchestrator_id: str | None = None,
               wait_for_writes: bool = True, episodes: bool = False,
               session_id: str | None = None, project_id: str | None = None,
               tags: Sequence[str] | None = None, include_restricted: bool = False,
               purpose: str | None = None, view: View | None = None,
               as_of: datetime | str | None = None, latest: bool = False,
               route: bool | None = None, known_at: datetime | str | None = None,
               tiers: Sequence[str] | None = None, run_id: str | None = None,
               conversation_id: str | None = None, log_after: int = 0) -> RecallBundle:
        """The memories most relevant to ``query`` (see ``orchmem.models.recall.search``).

        ``as_of``: what was true then (valid time); ``known_at``: what had been stored by
        then (transaction time); ``latest``: the heads of Updates chains; ``route``: the
        router's plan; ``run_id`` / ``conversation_id``: memories with a source from that
        run / conversation; ``log_after``: the page of ``bundle.log`` after this seq.

        Asking for another orchestrator (``orchestrator_id``) or for its memoryIds is
        denied and logged: the bundle is empty and says so in ``warnings``. A request
        that names a ``session_id`` and/or ``project_id`` sees global memories and its
        own; ``tags`` keeps those with every tag; ``tiers`` those of these tiers (an
        unknown tier raises MemoryValidationError); restricted memories come back only with
        ``include_restricted=True`` and a ``purpose`` (audited). A restricted read
        without a purpose raises MemoryValidationError (a bug in the caller).
        """
        view = _recall_view(view, session_id, project_id, tags, include_restricted, purpose,
                            tiers)
        check_log_after(log_after)  # a bad id or page is the caller's bug: raised
        plain_id(run_id, "runId")
        plain_id(conversation_id, "conversationId")
        target = orchestrator_id or self.orchestrator_id
        warnings: list[str] = []
        if not self.memory.enabled:
            return empty_bundle(target, query, ["memory is disabled (memory.enabled = false)"])
        if self.remote and target == self.orchestrator_id and not view.include_restricted:
            return remote_recall(self, query, top_n=top_n, types=types, memory_ids=memory_ids,
                                 include_inactive=include_inactive,
                                 wait_for_writes=wait_for_writes, view=view,
                                 asked={"as_of": as_of, "known_at": known_at, "latest": latest,
                                        "route": route, "episodes": episodes, "run_id": run_id,
                                        "conversation_id": conversation_id,
                                        "log_after": log_after or None})
        try:
            if wait_for_writes:
                left = self.wait_for_writes()
                if left:
                    warnings.append(f"{len(left)} of this client's write-backs are not "
                                    "committed yet; their memories may be missing")
            bundle = recall(target, query, databases=self.databases, top_n=top_n, types=types,
                            include_inactive=include_inactive, memory_ids=memory_ids,
                            requester=self.orchestrator_id, episodes=episodes, view=view,
                            purpose=purpose, as_of=as_of, known_at=known_at, latest=latest,
                            route=route, run_id=run_id, conversation_id=conversation_id,
                            log_after=log_after)
        except Exception as exc:
            return empty_bundle(target, query, [*warnings, self._warn("recall", exc)])
        if warnings:
            bundle = bundle.model_copy(update={"warnings": [*bundle.warnings, *warnings]})
        return bundle

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

    def bulletin(self, timeout: float | None = None, *, session_id: str | None = None,
                 project_id: str | None = None,
                 tags: Sequence[str] | None = None) -> BulletinResult:
        """The bulletin for this message, built by the worker (after this client's earlier
        writes, which precede it on the same queue). Naming a ``session_id`` and/or
        ``project_id`` (or ``tags``) builds it here instead, from global memories and
        that session's and project's (never restricted ones).

        Falls back to the last snapshot (``bulletins/latest.json``), or an empty bulletin,
        when the worker does not answer within ``memory.bulletin.timeout_s``.
        """
        if not self.memory.enabled:
            return self._fallback(["memory is disabled (memory.enabled = false)"])
        if session_id is not None or project_id is not None or tags:
            try:
                return self.scoped_bulletin(make_view(session_id, project_id, list(tags or ())))
            except Exception as exc:
                return self._fallback([self._warn("bulletin", exc)])
        limit = self.memory.bulletin.timeout_s if timeout is None else timeout
        # The request expires when this caller stops waiting: a worker behind a backlog
        # skips it instead of building a bulletin nobody reads.
        handle = self._publish(BULLETIN, "bulletin",
                               {"idempotencyKey": f"bulletin-{uuid.uuid4().hex}"},
                               expires_s=limit, fresh=True)
        if not handle.ok:
            return self._fallback([f"bulletin not requested: {handle.message}"])
        value = handle.wait(limit)
        if value is None or not value.get("ok"):
            reason = (f"no bulletin within {limit}s" if value is None else
                      f"bulletin failed: {value.get('message')}")
            return self._fallback([reason])
        return BulletinResult(bulletin={k: v for k, v in value.items()
                                        if k not in ("ok", "task", "text")},
                              text=str(value["text"]), source="live")

    def _fallback(self, warnings: list[str]) -> BulletinResult:
        workspace = self.databases.workspace(self.orchestrator_id)
        try:
            data = json.loads((workspace.bulletins_dir / "latest.json").read_text("utf-8"))
            snapshot = Bulletin.from_dict(data)
        except (OSError, ValueError, KeyError, TypeError):
            snapshot = None
        if snapshot is not None:
            warnings = [*warnings, f"using the last bulletin, from {snapshot.generated_at}"]
            source: Literal["snapshot", "empty"] = "snapshot"
        else:
            snapshot = Bulletin.empty(self.orchestrator_id, format_ts(utc_now()))
            warnings = [*warnings, "no bulletin snapshot yet: empty bulletin"]
            source = "empty"
        self._log("bulletin_fallback", source=source, warnings=warnings)
        logger.warning("bulletin of %s: %s", self.orchestrator_id, "; ".join(warnings))
        return BulletinResult(bulletin=snapshot.to_dict(), text=snapshot.to_text(),
                              source=source, warnings=warnings)

    def scoped_bulletin(self, view: View) -> BulletinResult:
        """The bulletin of one session and/or project, built here from the database
        (the worker's snapshot is the global one). Raises OrchmemError."""
        odb = self.databases.open(self.orchestrator_id, create=False)
        if odb is None:
            return BulletinResult(bulletin={}, text="", source="empty",
                                  warnings=["this orchestrator has no memory yet"])
        built = build(odb, utc_now(), view)
        return BulletinResult(bulletin=built.to_dict(), text=built.to_text(), source="live")

    def context_for(self, purpose: Purpose, query: str,
                    bulletin: BulletinResult | None = None, *, working: bool = False,
                    session_id: str | None = None, project_id: str | None = None,
                    format: str = "orchmem", max_chars: int | None = None,
                    max_tokens: int | None = None, episodic: bool | None = None,
                    pressure: float | None = None) -> Context:
        """The bulletin and the memories relevant to ``query``, as one bounded text block.

        Injection by tier (models/recall/injection.py, ``memory.context.*``): the
        procedural memories come first, always (bounded); profile and semantic ones are
        recalled for the query; episodic ones join when the router says the query asks
        what happened or for a similar case, for the purpose "diagnostics", or when
        ``episodic`` is True (False: never).
        Each line shows its tier.

        ``purpose`` is "selector" (choosing a workflow), "step" (a workflow step) or
        "diagnostics" (an investigation: more memories, with their provenance). Pass the
        message's ``bulletin`` to avoid building it twice. ``working`` adds the
        working-memory projection (working.md) as a block of its own, first.
        ``pressure``: the share (0..1) of the caller's context already in use; with
        ``memory.context.recall_mode = "fallback"``, at ``pressure_threshold`` or more
        recall is skipped (said in ``warnings``) and the bulletin and working memory kept.

        Never raises for memory's own failures (they become ``warnings``), but raises
        ``ValueError`` for any other ``purpose``: that is a bug in the caller, not a
        condition to degrade around.
        """
        return build_context(self, purpose, query, bulletin, working=working,
                             view=make_view(session_id, project_id), format=format,
                             max_chars=max_chars, max_tokens=max_tokens, episodic=episodic,
                             pressure=pressure)

    # -- reflection -------------------------------------------------------------

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

    def working_memory(self, *, refresh: bool = True) -> str | None:
        """The text of working.md (None while there is none), rebuilt first when it is
        stale (worker/client/working.py; a rebuild that does not come in time logs a
        ``working_stale`` warning and the last file is returned). ``refresh=False``
        reads the file as it is."""
        if not refresh:
            return read_working(self.databases.workspace(self.orchestrator_id).bulletins_dir)
        return fresh_working(self)[0]

    # -- execution log ----------------------------------------------------------

    def log_event(self, *, events: Sequence[dict[str, Any]],
                  idempotency_key: str | None = None) -> WriteHandle:
        """Append events to the execution log (see :mod:`orchmem.models.execlog.rules`);
        returns a handle at once, refused (``ok`` False, field errors) like a write-back."""
        payload: dict[str, Any] = {"events": list(events) if isinstance(events, list | tuple)
                                   else events}  # anything else: refused by the check
        if idempotency_key is not None:
            payload["idempotencyKey"] = idempotency_key
        return self._publish(LOG, "log", payload, check=lambda p: check_log_request(
            p, self.orchestrator_id, self.memory.log))

    def run(self, name: str | None = None, *, run_id: str | None = None,
            replay: bool = False, conversation_id: str | None = None,
            session_id: str | None = None, project_id: str | None = None,
            allowlist: Iterable[str] | None = None,
            compensations: Mapping[str, Compensation] | None = None,
            from_checkpoint: str | None = None) -> RunLog:
        """A run of the execution log, as a context manager (see :mod:`.runlog`).
        ``from_checkpoint``: a new run branched from that checkpoint (its run_start
        records it and its run; its first checkpoint has it as parent). Raises
        MemoryValidationError naming ``allowlist`` when it is not a list of tool names,
        and naming ``from_checkpoint`` for a checkpoint that cannot be restored
        (ScopeViolation for another orchestrator's); logged, nothing is sent."""
        try:
            branch = None if from_checkpoint is None else checkpoints.restore(
                self, from_checkpoint, "from_checkpoint")
            return RunLog(self, name, run_id=run_id, replay=replay,
                          conversation_id=conversation_id, session_id=session_id,
                          project_id=project_id, allowlist=allowlist,
                          compensations=compensations, branch_of=branch)
        except OrchmemError as exc:
            self._warn("run refused", exc)
            raise

    def restore(self, checkpoint_id: str) -> dict[str, Any]:
        """The checkpoint's metadata (``ref``: the state to load, ``schemaVersion``,
        ``runId``, ``parentCheckpointId``, ...), its schema checked against
        ``memory.log.checkpoint_schema_versions``: an incompatible one raises
        MemoryValidationError naming ``checkpointId.schemaVersion`` (logged)."""
        return checkpoints.restore(self, checkpoint_id)

    def checkpoint_diff(self, a: str, b: str) -> dict[str, Any]:
        """Two checkpoints' metadata, the fields that differ (``changed``), whether they
        are of one run and their nearest common ancestor (``commonAncestor``)."""
        return checkpoints.diff(self, a, b)

    def recorded(self, key: str) -> dict[str, Any] | None:
        """The execution-log event written under idempotency key ``key`` by any run of
        this orchestrator, or None (also when memory cannot be read: logged)."""
        try:
            odb = self.databases.open(self.orchestrator_id, create=False)
            return None if odb is None else event_by_id(
                odb, event_id_for(self.orchestrator_id, key))
        except OrchmemError as exc:
            self._warn("recorded", exc)
            return None


def _recall_view(view: View | None, session_id: str | None, project_id: str | None,
                 tags: Sequence[str] | None, include_restricted: bool, purpose: str | None,
                 tiers: Sequence[str] | None) -> View:
    """The view a recall reads with: the one given, else made of the scope arguments;
    ``tiers`` (checked, naming the field) narrow either."""
    made = view or make_view(session_id, project_id, list(tags or ()), include_restricted,
                             purpose, tiers)
    if tiers is not None and made.tiers != check_tiers(tiers):
        made = replace(made, tiers=check_tiers(tiers))
    return made
