"""The runs and steps of the execution log, as ``memory.run`` gives them
(``MemoryClient.log_event`` and ``MemoryClient.run`` publish their events).

    with memory.run("triage", conversation_id="c-1") as run:
        with run.step("plan") as step:
            step.prompt("Plan the fix for ticket 42")
            step.tool_call("search_tickets", data={"q": "42"}, idempotency_key="t42-search")
            step.write_back(workflow_output={"output": {"decisions": ["Patch the parser"]}})
        run.checkpoint("s3://bucket/state/42.json", schema_version=1)

Every event has an idempotency key that is the run's own count of its events
(``<runId>/<n>``) unless given: running a run again with the same run id (a retrying
caller) appends nothing twice. A replay is new: a run in replay mode (``replay=True``,
or ``set_replay(True)`` from some event on) draws an attempt id, records it in a
``replay_mode`` event, and keys its events within it (``<runId>/replay-<attempt>/<n>``,
a given key ``<key>/replay-<attempt>``), so every replay of an existing run is logged
in full, marked ``replay``, beside the original.

A run's own events (start, end, checkpoints, outcome) are one message each on the one
publish path (task ``orchmem.log``, outboxed like a write-back). A step's events are
held until the step writes back or ends: ``step.write_back`` carries the events so far
in its write-back (``logEvents``), so the worker writes them with the memories, in one
transaction with one receipt, and the step's end sends what is left as one log
message. Held events are not in the log until then; a step that never
ends (its process died) logs nothing more, as its write-back never happened either.
Only a step used as a context manager holds: a step's call outside a ``with`` block
sends its event at once, and the run's end sends what a step entered but not left
still holds, before ``run_end``: no event is dropped.

Replay safety (seed 003): ``run.recorded(key)`` is the event already logged under an
idempotency key (by this run or any earlier run of the orchestrator), or None, so a
side effect is made once; a run in replay mode with an ``allowlist`` refuses a tool call
whose name is not on it (:class:`~orchmem.config.ReplayRefused`, the refusal logged as a
``tool_call`` event with status ``refused``); compensation hooks registered per tool
(``compensations=`` or :meth:`RunLog.on_compensate`) undo the run's tool calls, newest
first, when the run fails or is rolled back (:meth:`RunLog.rollback`), each one logged
as a ``compensation`` event citing its tool call.

A step's write-back names the run and the step in its memories' provenance
(``workflowRunId``/``stepId``), which is how a memory cites its log events
(``orchmem log --memory``). A run in replay mode marks every event ``replay``: the
orchestrator must not repeat a tool call's side effects then (``run.replay``). A run
placed in a session or project (``session_id``, ``project_id``; its
``conversation_id`` is its session otherwise) gives an episode only that session's
or project's recalls see.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from orchmem.config import ReplayRefused
from orchmem.models.execlog.rules import (
    check_allowlist,
    digest_of,
    event_id_for,
    first_sentence_of,
    new_run_id,
)
from orchmem.models.telemetry import names, spans
from orchmem.worker.client.handles import WriteHandle

if TYPE_CHECKING:
    from orchmem.worker.client.memory_client import MemoryClient


class RunLog:
    """One run of a workflow, as its events reach the log (see the module doc)."""

    def __init__(self, client: MemoryClient, name: str | None = None, *,
                 run_id: str | None = None, replay: bool = False,
                 conversation_id: str | None = None, session_id: str | None = None,
                 project_id: str | None = None, allowlist: Iterable[str] | None = None,
                 compensations: Mapping[str, Compensation] | None = None,
                 branch_of: dict[str, Any] | None = None) -> None:
        #: Tool names a replay may call (None: the caller reads ``replay`` itself).
        self.allowlist = check_allowlist(allowlist)
        self.client = client
        self.name = name
        self.run_id = run_id or new_run_id(client.orchestrator_id)
        self.replay = replay
        #: The replay attempt this run's events are keyed in (None: not a replay).
        self.attempt: str | None = uuid.uuid4().hex[:12] if replay else None
        self.conversation_id = conversation_id
        self.placement = {k: v for k, v in (("conversationId", conversation_id),
                                            ("sessionId", session_id),
                                            ("projectId", project_id)) if v}
        self._count = 0
        #: Every handle of this run's events, in order (``ok`` False: not published).
        self.handles: list[WriteHandle] = []
        #: The steps of this run, whose held events its end sends.
        self._steps: list[StepLog] = []
        #: Events made under a given idempotency key, found by :meth:`recorded` before
        #: the worker has written them.
        self._made: dict[str, dict[str, Any]] = {}
        #: The tool calls this run made (side effects), oldest first, not compensated.
        self.tool_calls: list[dict[str, Any]] = []
        self._compensations: dict[str, Compensation] = dict(compensations or {})
        #: The checkpoint this run branches from (restored and checked), or None.
        self.branch_of = branch_of
        #: This run's last checkpoint: the parent of its next one.
        self._last_checkpoint = branch_of["checkpointId"] if branch_of else None

    def make(self, kind: str, *, step_id: str | None = None,
             idempotency_key: str | None = None, **fields: Any) -> tuple[dict[str, Any], str]:
        """The next event of this run, not sent, and its eventId."""
        self._count += 1
        key = idempotency_key or f"{self.run_id}/{self._count}"
        if self.attempt is not None:  # a replay's events are its own, not the original's
            key = (f"{idempotency_key}/replay-{self.attempt}" if idempotency_key
                   else f"{self.run_id}/replay-{self.attempt}/{self._count}")
        event = {"runId": self.run_id, "kind": kind, "idempotencyKey": key,
                 "replay": self.replay, **({"stepId": step_id} if step_id else {}),
                 **{_camel(k): v for k, v in fields.items() if v is not None}}
        event_id = event_id_for(self.client.orchestrator_id, key)
        if idempotency_key:
            self._made[idempotency_key] = {**event, "eventId": event_id}
        return event, event_id

    def event(self, kind: str, *, step_id: str | None = None,
              idempotency_key: str | None = None, **fields: Any) -> str:
        """Log one event of this run now; returns its eventId (known before it is
        written)."""
        event, event_id = self.make(kind, step_id=step_id, idempotency_key=idempotency_key,
                                    **fields)
        self.send([event])
        return event_id

    def send(self, events: list[dict[str, Any]]) -> WriteHandle:
        """Publish ``events`` as one log message (one transaction)."""
        handle = self.client.log_event(events=events)
        self.handles.append(handle)
        return handle

    def __enter__(self) -> RunLog:
        branch = {"branchOf": {"runId": self.branch_of["runId"],
                               "checkpointId": self.branch_of["checkpointId"]}} \
            if self.branch_of else {}
        self.event("run_start", name=self.name, data={**self.placement, **branch} or None)
        if self.attempt is not None:
            self._replay_mode(True)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for step in self._steps:  # a step entered and never left: its events still go
            step.flush()
        if exc is not None and self.tool_calls:
            self.rollback(f"{type(exc).__name__}: {exc}")
        if exc is None:
            self.event("run_end", status="ok")
        else:
            self.event("run_end", status="error",
                       text=first_sentence_of(f"{type(exc).__name__}: {exc}"))

    def step(self, step_id: str, name: str | None = None) -> StepLog:
        """A step of this run: used in a ``with`` block, it holds its events until it
        writes back or ends; used outside one, each event is sent at once."""
        step = StepLog(self, step_id, name)
        self._steps.append(step)
        return step

    def checkpoint(self, ref: str, *, schema_version: int, parent_id: str | None = None,
                   step_id: str | None = None) -> str:
        """Log a checkpoint (a pointer to state); its parent is ``parent_id``, or this
        run's previous checkpoint (the one it branched from, for its first). Its span
        holds the ids and the state's schema version (never ``ref``), and is the parent
        of the message that appends it."""
        parent_id = parent_id or self._last_checkpoint
        with spans.span(names.SPAN_CHECKPOINT_CREATE, {
                names.ORCHESTRATOR: self.client.orchestrator_id, names.RUN_ID: self.run_id,
                names.SCHEMA_VERSION: schema_version,
                names.PARENT_CHECKPOINT: bool(parent_id)}) as span:
            self._last_checkpoint = self.event("checkpoint", step_id=step_id, checkpoint={
                "ref": ref, "schemaVersion": schema_version,
                **({"parentId": parent_id} if parent_id else {})})
            span.set(names.CHECKPOINT_ID, self._last_checkpoint)
        return self._last_checkpoint

    def recorded(self, key: str) -> dict[str, Any] | None:
        """The event logged under idempotency key ``key`` (by this run, or any run of
        this orchestrator before it), or None: ask before a side effect, and skip it
        when it is recorded. This run's own events count from when they are made."""
        found = self.client.recorded(key)
        if found is not None:
            return found
        made = self._made.get(key)
        return None if made is None else {**made, "pending": True}

    def allows(self, tool: str) -> bool:
        """Whether this run may call ``tool`` now: always outside replay mode or without
        an allowlist; in replay mode with one, only the tools it names."""
        return not self.replay or self.allowlist is None or tool in self.allowlist

    def on_compensate(self, tool: str, hook: Compensation) -> None:
        """Register ``hook(tool_call_event)``: it undoes a call of ``tool`` when this run
        fails or is rolled back."""
        self._compensations[tool] = hook

    def rollback(self, reason: str = "rolled back") -> list[str]:
        """Run the compensation hook of every tool call this run made, newest first, and
        log each one (``compensation``: status ``ok`` or ``error``, its parentId the tool
        call); a call without a hook is logged as ``skipped``. Returns their eventIds."""
        done: list[str] = []
        calls, self.tool_calls = self.tool_calls, []
        for call in reversed(calls):
            hook = self._compensations.get(call["name"])
            status, text = ("skipped", "no compensation hook") if hook is None else ("ok", None)
            if hook is not None:
                try:
                    hook(call)
                except Exception as exc:  # a failing hook is logged; the others still run
                    status, text = "error", first_sentence_of(f"{type(exc).__name__}: {exc}")
            done.append(self.event("compensation", name=call["name"], status=status,
                                   parent_id=call["eventId"], text=text,
                                   data={"reason": first_sentence_of(reason, 200)}))
        return done

    def outcome(self, status: str, text: str | None = None) -> str:
        return self.event("outcome", status=status, text=text)

    def set_replay(self, replay: bool = True) -> str:
        """Switch replay mode on (or off) from here on, recorded in the log; switched on,
        the events from here on are keyed in a new replay attempt."""
        self.replay = replay
        if replay and self.attempt is None:
            self.attempt = uuid.uuid4().hex[:12]
        return self._replay_mode(replay)

    def _replay_mode(self, on: bool) -> str:
        data = {"attempt": self.attempt, **({"allowlist": self.allowlist}
                                            if self.allowlist is not None else {})}
        return self.event("replay_mode", status="on" if on else "off",
                          data=data if on else None)

    def wait(self, timeout: float = 30.0) -> list[dict[str, Any] | None]:
        """Wait for every event of this run so far to be written; their results."""
        return [handle.wait(timeout) for handle in self.handles]


class StepLog:
    """A step of a run: ``step_start``/``step_end`` around the ``with`` block; its
    events are held and sent with its write-back, or together when it ends."""

    def __init__(self, run: RunLog, step_id: str, name: str | None) -> None:
        self.run, self.step_id, self.name = run, step_id, name
        self.event_id: str | None = None
        #: Events of this step not sent yet.
        self.held: list[dict[str, Any]] = []
        #: Inside its ``with`` block: events are held; outside, each is sent at once.
        self.entered = False

    def __enter__(self) -> StepLog:
        self.entered = True
        self.event_id = self._hold("step_start", name=self.name)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._event("step_end", status="ok" if exc is None else "error")
        self.entered = False
        self.flush()

    def flush(self) -> WriteHandle | None:
        """Send the held events now, as one log message; None when none are held."""
        held, self.held = self.held, []
        return self.run.send(held) if held else None

    def _hold(self, kind: str, **fields: Any) -> str:
        event, event_id = self.run.make(kind, step_id=self.step_id, **fields)
        if self.entered:
            self.held.append(event)
        else:  # no with block, so no end of the step would send it
            self.run.send([event])
        return event_id

    def _event(self, kind: str, **fields: Any) -> str:
        return self._hold(kind, parent_id=self.event_id, **fields)

    def _made(self, event_id: str, **fields: Any) -> dict[str, Any]:
        return {"eventId": event_id, "runId": self.run.run_id, "stepId": self.step_id,
                **{k: v for k, v in fields.items() if v is not None}}

    def prompt(self, text: str, *, actor: str | None = None, keep_text: bool = True) -> str:
        return self._text("prompt", text, actor, keep_text)

    def response(self, text: str, *, actor: str | None = None, keep_text: bool = True) -> str:
        return self._text("response", text, actor, keep_text)

    def _text(self, kind: str, text: str, actor: str | None, keep_text: bool) -> str:
        if keep_text:
            return self._event(kind, text=text, actor=actor)
        return self._event(kind, digest=digest_of(text), actor=actor)

    def tool_call(self, name: str, *, data: dict[str, Any] | None = None,
                  status: str | None = None, idempotency_key: str | None = None,
                  actor: str | None = None) -> str:
        """Log a tool call (a side effect) before or as it is made; its eventId. In
        replay mode, a tool not on the run's allowlist is refused: the refusal is logged
        and :class:`~orchmem.config.ReplayRefused` raised (do not execute it)."""
        if not self.run.allows(name):
            self._event("tool_call", name=name, status="refused", actor=actor,
                        data={"refused": "not on the replay allowlist"})
            self.flush()  # the refusal is in the log even if the caller stops here
            raise ReplayRefused(f"tool call {name[:80]!r} refused in replay mode: it is not "
                                "on the run's allowlist; do not execute it")
        event_id = self._event("tool_call", name=name, data=data, status=status,
                               actor=actor, idempotency_key=idempotency_key)
        self.run.tool_calls.append(self._made(event_id, name=name, data=data,
                                              idempotencyKey=idempotency_key))
        return event_id

    def write_back(self, **kwargs: Any) -> WriteHandle:
        """``memory.write_back`` whose memories cite this run and step (a
        ``workflow_output`` gets them as ``workflowRunId``/``stepId``, an explicit
        memory without a source gets a workflow-output source naming them), carrying
        the step's held events: the worker writes both in one transaction. When the
        write-back is refused before it is sent, the events are sent on their own."""
        run_id = self.run.run_id
        output = kwargs.get("workflow_output")
        if isinstance(output, dict):
            kwargs["workflow_output"] = {"workflowRunId": run_id, "stepId": self.step_id,
                                         **output}
        memories = kwargs.get("memories")
        if isinstance(memories, list | tuple):
            source = {"sourceType": "workflow_output", "capturedBy": "system",
                      "workflowRunId": run_id, "stepId": self.step_id}
            kwargs["memories"] = [{**m, "source": dict(source)}
                                  if isinstance(m, dict) and "source" not in m else m
                                  for m in memories]
        held, self.held = self.held, []
        handle = self.run.client.write_back(**kwargs, log_events=held or None)
        if held:
            self.run.handles.append(handle)
            if not handle.ok and not handle.outboxed:
                self.run.send(held)  # what happened is logged even if the write was refused
        return handle


#: A compensation hook: called with the tool call's event (eventId, runId, stepId, name,
#: data, idempotencyKey) to undo its side effect.
Compensation = Callable[[dict[str, Any]], object]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
