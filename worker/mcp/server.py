"""The MCP server: one orchestrator's memory as tools for a model (``orchmem mcp``).

Built on the official MCP Python SDK (``mcp.server.MCPServer``, called FastMCP before
mcp 2). Tools: ``remember``, ``recall``, ``bulletin``, ``forget``, ``recover``,
``supersede``; the
bulletin is also the resource ``memory://bulletin``. Every tool calls one
:class:`~orchmem.worker.client.memory_client.MemoryClient` method; a refusal is raised as an error
whose message starts with the CLI's code (``validation: …``, ``not_found: …``), which
the SDK returns to the model as a tool error (``ToolError``).

Over stdio the server runs with its user's rights on one orchestrator, named on the
command line: there is no token to check. Writes go through the broker (a worker must
run), or run in this process with ``--immediate``.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from importlib.metadata import version
from typing import Annotated, Any

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import Field, ValidationError

from orchmem.config import MemoryNotFound, MemoryValidationError, OrchmemError, Settings
from orchmem.models.core.shapes import Flag, MemoryType, utc_now
from orchmem.models.core.validity import check_as_of
from orchmem.models.recall.search import check_scope
from orchmem.models.telemetry import names, spans
from orchmem.worker.client.handles import WriteHandle
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.client.write_wait import outcome

INSTRUCTIONS = """\
Long-term memory of one agent orchestrator. Call `recall` before answering anything that
may depend on what you were told before (preferences, decisions, goals, facts about the
user or the project). Call `remember` when the user states something worth keeping across
conversations: one self-contained statement per call. When a stored memory is wrong or
outdated, `supersede` it with the corrected statement; `forget` one that must go. Read
`bulletin` (or the memory://bulletin resource) at the start of a conversation."""


def _fail(exc: OrchmemError) -> ToolError:
    """The SDK's anticipated failure: its message reaches the model (others are hidden)."""
    return ToolError(f"{exc.code}: {exc.message}")


def coded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a tool whose every refusal carries its code: a string argument holding a
    lone surrogate is ``validation: <argument>: …``, and an OrchmemError raised anywhere
    inside becomes ``<code>: <message>`` (the SDK would hide it as "Error executing
    tool"). The signature is ``fn``'s, so the SDK builds the same input schema; an
    async ``fn`` stays async (the SDK runs a synchronous tool in a thread)."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_tool(*args: Any, **kwargs: Any) -> Any:
            _check_text(kwargs)
            try:
                return await fn(*args, **kwargs)
            except OrchmemError as exc:
                raise _fail(exc) from None

        return async_tool

    @functools.wraps(fn)
    def tool(*args: Any, **kwargs: Any) -> Any:
        _check_text(kwargs)
        try:
            return fn(*args, **kwargs)
        except OrchmemError as exc:
            raise _fail(exc) from None

    return tool


def _check_text(arguments: dict[str, Any]) -> None:
    for name, value in arguments.items():
        if isinstance(value, str) and _SURROGATE.search(value):
            raise _fail(MemoryValidationError(f"{name}: a lone UTF-16 surrogate is not text",
                                              [{"path": name, "message": "not text"}]))


_SURROGATE = re.compile(r"[\ud800-\udfff]")
_MEMORY_FIELDS = ("memoryId", "type", "content", "importance", "confidence", "status",
                  "createdAt", "validFrom", "validTo")
_EPISODE_FIELDS = ("episodeId", "runId", "title", "summary", "outcome", "participants",
                   "tools", "startedAt", "endedAt", "memoryIds", "score")


def _memory(dumped: dict[str, Any], score: float) -> dict[str, Any]:
    return {**{k: dumped.get(k) for k in _MEMORY_FIELDS}, "score": score}


class MemoryTools:
    """The tools, bound to one orchestrator's client; each docstring is what the model
    reads."""

    def __init__(self, client: MemoryClient, wait_s: float) -> None:
        self.client = client
        self.wait_s = wait_s

    async def remember(
        self,
        content: Annotated[str, Field(description="One self-contained statement, in plain "
                                      "words, e.g. 'The user prefers answers in French'.")],
        type: Annotated[MemoryType, Field(description="Fact, Preference, Decision, Identity, "
                                          "Event, Observation, Goal or Todo.")] = MemoryType.FACT,
        importance: Annotated[int, Field(ge=0, le=100, description="0-100; 50 is ordinary, "
                                         "80+ for what must not be missed.")] = 50,
        confidence: Annotated[float, Field(ge=0.0, le=1.0, description="How sure you are "
                                           "that it is true, 0-1.")] = 0.9,
    ) -> dict[str, Any]:
        """Store one memory for later conversations. Returns its memoryId (an identical
        statement stored before is reinforced, not duplicated)."""
        memory = {"type": type.value, "content": content, "importance": importance,
                  "confidence": confidence,
                  "source": {"sourceType": "manual", "capturedBy": "extractor"}}
        value = await self._written(functools.partial(self.client.write_back,
                                                      memories=[memory]))
        return {"memoryIds": value.get("memoryIds", []),
                "reinforced": value.get("reinforced", []),
                "duplicate": value.get("duplicate", False)}

    def recall(
        self,
        query: Annotated[str, Field(description="What you want to know, in plain words.")],
        top_n: Annotated[int, Field(ge=1, le=50, description="How many memories.")] = 8,
        include_inactive: Annotated[Flag, Field(description="Also superseded and retracted "
                                                "memories (history).")] = False,
        session_id: Annotated[str | None, Field(description="This conversation's session: "
                                                "its own memories too (never another's)."
                                                )] = None,
        project_id: Annotated[str | None, Field(description="This project: its memories "
                                                "too.")] = None,
        as_of: Annotated[str | None, Field(description="What was true at this time, "
                                           "whenever it was told (ISO 8601 with a time "
                                           "zone, e.g. 2024-05-01T10:00:00Z; not in the "
                                           "future).")] = None,
        known_at: Annotated[str | None, Field(description="What had been told (stored) by "
                                              "this time (ISO 8601 with a time zone)."
                                              )] = None,
        latest: Annotated[Flag, Field(description="Only the latest state of each subject "
                                      "(the newest of a chain of updates).")] = False,
        route: Annotated[Flag | None, Field(description="Plan the search by the kind of "
                                            "question (what happened, when, similar case); "
                                            "default: the orchestrator's setting.")] = None,
        episodes: Annotated[Flag, Field(description="Also similar past runs (episodes): "
                                        "title, summary, outcome.")] = False,
        tiers: Annotated[list[str] | None, Field(description="Only memories of these "
                                                 "tiers: profile (who the user is), "
                                                 "semantic (knowledge), episodic (what "
                                                 "happened), procedural (how to work)."
                                                 )] = None,
    ) -> dict[str, Any]:
        """Find the stored memories most relevant to a question, best first. Each has a
        memoryId (cite it, or pass it to supersede/forget), its type, content,
        importance, confidence, status and validity window; ``plan`` says how the search
        was planned, ``episodes`` lists similar past runs when asked."""
        try:
            check_as_of(as_of, utc_now())  # a tool error naming as_of, not an empty answer
            check_as_of(known_at, utc_now(), "known_at")
        except OrchmemError as exc:
            raise _fail(exc) from None
        bundle = self.client.recall(query, top_n=top_n, include_inactive=include_inactive,
                                    session_id=session_id, project_id=project_id,
                                    as_of=as_of, known_at=known_at, latest=latest,
                                    route=route, episodes=episodes, tiers=tiers)
        memories = [_memory(n.memory.dump(), round(n.scores.score, 6)) for n in bundle.nodes]
        found: dict[str, Any] = {"memories": memories, "warnings": bundle.warnings,
                                 "plan": bundle.plan}
        if episodes:
            found["episodes"] = [{k: e[k] for k in _EPISODE_FIELDS if k in e}
                                 for e in bundle.episodes]
        return found

    def bulletin(self) -> str:
        """The short briefing of what matters now: knowledge summary, active goals, open
        todos, recent decisions, preferences, conflicts. Every line cites memoryIds."""
        return self.client.bulletin().text

    async def forget(
        self,
        memory_id: Annotated[str, Field(description="The memoryId, from recall.")],
        hard: Annotated[Flag, Field(description="Erase its text for good (only when asked "
                                    "to delete data); default: retract it, history kept.")
                        ] = False,
        reason: Annotated[str | None, Field(description="Why, for the audit log.")] = None,
    ) -> dict[str, Any]:
        """Forget a memory: it is no longer recalled. Use supersede instead when the
        memory is outdated and a corrected statement exists."""
        def publish() -> WriteHandle:
            self._existing([memory_id])
            return self.client.forget(memory_id, hard=hard, reason=reason)

        value = await self._written(publish, [memory_id])
        return {"forgotten": memory_id, "hard": hard, "memoryIds": value.get("memoryIds", [])}

    async def recover(
        self,
        memory_id: Annotated[str, Field(description="The memoryId of a forgotten memory.")],
        reason: Annotated[str | None, Field(description="Why, for the audit log.")] = None,
    ) -> dict[str, Any]:
        """Bring back a memory that was forgotten softly (not a hard-erased one): it is
        recalled again."""
        await self._written(functools.partial(self.client.recover, memory_id, reason=reason,
                                              wait_for_memory_s=0), [memory_id])
        return {"recovered": memory_id}

    async def supersede(
        self,
        memory_id: Annotated[str, Field(description="The outdated memory's memoryId.")],
        content: Annotated[str, Field(description="The corrected statement that replaces it.")],
        reason: Annotated[str | None, Field(description="Why it changed.")] = None,
    ) -> dict[str, Any]:
        """Replace an outdated or wrong memory by a corrected statement. The old one is
        kept as history (status superseded) and linked to the new one."""
        def publish() -> WriteHandle:
            self._existing([memory_id])
            return self.client.supersede(memory_id, content=content, reason=reason)

        value = await self._written(publish, [memory_id])
        return {"superseded": memory_id, "supersededBy": value.get("supersededBy")}

    def _existing(self, memory_ids: list[str]) -> None:
        """Fail unless every memory exists (after this server's own pending writes, which
        :meth:`_written` awaited)."""
        client = self.client
        try:
            found = {n.memory_id for n in client.get(memory_ids)}
            missing = [i for i in memory_ids if i not in found]
            if missing:
                raise MemoryNotFound(f"no memory {missing[0]}; use recall to find memoryIds")
        except OrchmemError as exc:
            raise _fail(exc) from None

    async def _written(self, publish: Callable[[], WriteHandle],
                       edited: list[str] | None = None) -> dict[str, Any]:
        """Publish a write in a thread (a short blocking call), then await its result on
        the event loop (:mod:`orchmem.worker.client.write_wait`): no thread is held while
        the worker works.
        An edit of ``edited`` memories first checks their scope and waits for this
        server's earlier writes, so that it finds the memories they wrote."""
        if edited is not None:
            client = self.client
            try:  # a refusal is logged to a file: in a thread as well
                await anyio.to_thread.run_sync(check_scope, client.databases,
                                               client.orchestrator_id, client.orchestrator_id,
                                               edited)
            except OrchmemError as exc:
                raise _fail(exc) from None
            await client.wait_for_writes_async()
        handle = await anyio.to_thread.run_sync(_published, publish)
        if not handle.ok:
            raise ToolError(f"{handle.error}: {handle.message}"
                             + (" (kept, it will be written later)" if handle.outboxed else ""))
        value = await outcome(handle, self.wait_s)
        if value is None:
            raise ToolError(f"timeout: not committed within {self.wait_s:g}s; it stays "
                             "queued and will be written when a worker runs")
        if not value.get("ok", True):
            raise ToolError(f"{value.get('error')}: {value.get('message')}")
        return value


def _published(publish: Callable[[], WriteHandle]) -> WriteHandle:
    handle = publish()
    handle.poll_only()
    return handle


class MemoryServer(MCPServer[Any]):
    """The SDK's server, with a refusal's text as docs/guide/http-api-and-mcp.md#mcp gives
    it: the code first (``validation: top_n: …``, ``not_found: …``), without the SDK's
    "Error executing tool …" prefix or pydantic's wording of the arguments' model."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        """Call the tool ``name`` in a server span (joining the caller's trace when its
        request carries ``traceparent``); a refusal is re-raised with its own text."""
        with spans.span(f"tools/call {name}", {names.MCP_TOOL: name}, kind="server",
                        parent=trace_carrier(context)):
            return await self._call_tool(name, arguments, context)

    async def _call_tool(self, name: str, arguments: dict[str, Any], context: Any) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash: the SDK keeps its text on the server
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):  # the arguments failed their schema
                raise ToolError(argument_errors(cause)) from cause
            if isinstance(cause, ToolError):  # raised by a tool below with its code
                raise ToolError(str(cause)) from cause
            raise


def trace_carrier(context: Any) -> dict[str, str]:
    """The trace context of a tool call: the ``traceparent`` (and ``tracestate``) of its
    HTTP request's headers, or of the request's ``_meta`` (stdio); {} when none."""
    if not spans.enabled() or context is None:
        return {}
    try:
        request_context = context.request_context
    except (AttributeError, ValueError, LookupError):
        return {}
    headers = getattr(getattr(request_context, "request", None), "headers", None)
    found = spans.context_of(headers)
    if not found:
        meta = getattr(request_context, "meta", None)
        found = spans.context_of(meta if isinstance(meta, dict) else
                                 getattr(meta, "model_extra", None))
    return found


def argument_errors(exc: ValidationError) -> str:
    """``validation: <argument>: <what is wrong>`` for each bad argument (at most five),
    naming the argument, never echoing its value."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {str(err['msg']).removeprefix('Value error, ')}")
    more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "validation: " + "; ".join(parts) + more


def create_mcp(settings: Settings, orchestrator_id: str, *, immediate: bool = False
               ) -> MCPServer[Any]:
    """The MCP server for ``orchestrator_id``."""
    client = MemoryClient(orchestrator_id, settings, immediate=immediate)
    tools = MemoryTools(client, settings.api.wait_timeout_s)
    server = MemoryServer(f"orchmem-{orchestrator_id}", version=version("orchmem"),
                       instructions=INSTRUCTIONS)
    for fn in (tools.remember, tools.recall, tools.bulletin, tools.forget, tools.recover,
               tools.supersede):
        server.add_tool(coded(fn))
    server.resource("memory://bulletin", name="bulletin", mime_type="text/markdown",
                    description="The orchestrator's current bulletin.")(tools.bulletin)
    return server
