"""The handlers of ``/v1/orchestrators/{orchestratorId}/…`` (see :mod:`.app`).

Each one: admit the token (a dependency, so it runs before anything is parsed), parse,
call one ``MemoryClient`` method, shape the answer. Bodies are validated with the
models the worker uses (``WritebackRequest``) or the edit shapes of :mod:`.bodies`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel
from starlette.responses import JSONResponse, Response

from orchmem.config import (
    MemoryDisabled,
    MemoryNotFound,
    MemoryValidationError,
)
from orchmem.models.core.payloads import WritebackRequest, with_default_sources
from orchmem.models.core.shapes import CONTROL_CHARS, MemoryType, utc_now, validate
from orchmem.models.core.validity import check_as_of
from orchmem.models.recall.search import check_scope
from orchmem.models.storage.db.stats import stats as memory_stats
from orchmem.models.storage.visibility import make_view
from orchmem.worker.api.bodies import (
    ContextBody,
    ForgetBody,
    LinkBody,
    RecoverBody,
    RetractBody,
    SupersedeBody,
)
from orchmem.worker.api.errors import STATUS, code_of, error_body, json_error
from orchmem.worker.api.json_checks import check_json_depth, check_plain_strings
from orchmem.worker.api.state import ApiState
from orchmem.worker.client.handles import WriteHandle
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.client.write_wait import outcome

PREFIX = "/v1/orchestrators/{orchestratorId}"
router = APIRouter(prefix=PREFIX, tags=["memory"])
M = TypeVar("M", bound=BaseModel)
E = TypeVar("E", SupersedeBody, RetractBody, LinkBody, ForgetBody, RecoverBody)
SECURITY: list[dict[str, list[str]]] = [{"bearer": []}]


@dataclass
class Member:
    """An admitted request: its orchestrator's client and the server's state."""

    client: MemoryClient
    state: ApiState

    @property
    def orchestrator_id(self) -> str:
        return self.client.orchestrator_id


async def member(request: Request,
                 orchestrator_id: Annotated[str, PathParam(
                     alias="orchestratorId", description="The orchestrator the token is for.")]
                 ) -> AsyncIterator[Member]:
    """Admit the request (401/403, logged; 429 past the orchestrator's cap on requests
    in progress) and hand over its orchestrator's client. Runs on the event loop, so a
    tenant whose requests fill the thread pools is still refused at once."""
    state: ApiState = request.app.state.orchmem
    operation = request.url.path.rsplit("/", 1)[-1][:40]
    try:
        state.guard.admit(request.headers.get("authorization"), orchestrator_id, operation)
    except MemoryNotFound:
        state.drop(orchestrator_id)  # its client's caches (the bulletin) go with it
        raise
    state.enter(orchestrator_id)
    try:
        client = await anyio.to_thread.run_sync(state.client, orchestrator_id)
        yield Member(client, state)
    finally:
        state.leave(orchestrator_id)


async def in_write_pool(m: Member, wait: bool, write: Callable[..., WriteHandle],
                        *args: Any) -> Response:
    """Publish a write in the write pool (checks and a publish: a short blocking call),
    then answer with its outcome, awaited on the event loop
    (:mod:`orchmem.worker.client.write_wait`): no thread of either pool is held while the
    worker works."""
    handle = await anyio.to_thread.run_sync(_published, write, m, *args,
                                            limiter=m.state.write_limiter)
    return await _answer(m, handle, wait)


def _published(write: Callable[..., WriteHandle], m: Member, *args: Any) -> WriteHandle:
    handle = write(m, *args)
    handle.poll_only()  # awaited by polling, even with ?wait=false: never pushed here
    return handle


async def checked_edit(m: Member, model: type[E], body: Any,
                       memory_ids: Callable[[E], list[str]]) -> E:
    """Parse an edit and check the scope of the memories it names (in the write pool),
    then wait (a bounded time) for this server's earlier writes to the orchestrator,
    so that the edit finds the memories they wrote: no thread is held between the
    polls of their receipts."""
    edit = await anyio.to_thread.run_sync(_checked, m, model, body, memory_ids,
                                          limiter=m.state.write_limiter)
    await m.client.wait_for_writes_async(limiter=m.state.write_limiter)
    return edit


def _checked(m: Member, model: type[E], body: Any, memory_ids: Callable[[E], list[str]]) -> E:
    edit = _parse(model, body)
    ids = memory_ids(edit)
    _enabled(m)
    check_scope(m.client.databases, m.orchestrator_id, m.orchestrator_id, ids)
    return edit


async def json_body(request: Request) -> Any:
    """The request body as JSON (after the size limit), or a validation error."""
    raw = await request.body()
    if not raw.strip():
        raise MemoryValidationError("the request body is empty: send a JSON object",
                                    [{"path": "(body)", "message": "required"}])
    text = raw.decode("utf-8", errors="replace")
    check_json_depth(text)  # before the decoder recurses into it
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MemoryValidationError(f"the request body is not JSON: {str(exc)[:200]}",
                                    [{"path": "(body)", "message": "not JSON"}]) from None
    check_plain_strings(value)
    return value


#: An admitted request (the token checked first); the JSON body; the wait flag.
Admitted = Annotated[Member, Depends(member)]
JsonBody = Annotated[Any, Depends(json_body)]
Wait = Annotated[bool, Query(description="Wait (api.wait_timeout_s) for the worker's result.")]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _body_doc(model: str) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{model}"}
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": schema}}}}


def _parse(model: type[M], body: Any) -> M:
    return validate(model, body)


# -- reads ------------------------------------------------------------------------


@router.get("/recall", openapi_extra={"security": SECURITY},
            summary="The memories most relevant to a query (as `orchmem recall --json`)")
def recall(m: Admitted,
           q: Annotated[str, Query(description="What to recall, in plain words.")],
           top_n: Annotated[int | None, Query(ge=1, le=500)] = None,
           types: Annotated[list[MemoryType] | None, Query(alias="type")] = None,
           include_inactive: bool = False,
           session_id: Annotated[str | None, Query(alias="sessionId")] = None,
           project_id: Annotated[str | None, Query(alias="projectId")] = None,
           tags: Annotated[list[str] | None, Query(alias="tag")] = None,
           as_of: Annotated[str | None, Query(alias="asOf", description=(
               "What was true at this time: valid time (ISO 8601 with a time zone)."))] = None,
           known_at: Annotated[str | None, Query(alias="knownAt", description=(
               "What had been stored by this time: transaction time (ISO 8601)."))] = None,
           latest: Annotated[bool, Query(description="Heads of Updates chains.")] = False,
           route: Annotated[bool | None, Query(description=(
               "Plan by the kind of question (default: memory.retrieval.router)."))] = None,
           episodes: Annotated[bool, Query(description="Add similar past episodes.")] = False,
           tiers: Annotated[list[str] | None, Query(alias="tier", description=(
               "Only memories of this tier (repeatable): profile, semantic, episodic, "
               "procedural."))] = None,
           run_id: Annotated[str | None, Query(alias="runId", description=(
               "Only memories with a source from this workflow run."))] = None,
           conversation_id: Annotated[str | None, Query(alias="conversationId", description=(
               "Only memories with a source from this conversation."))] = None,
           log_after: Annotated[int, Query(alias="logAfter", ge=0, description=(
               "The page of a what-happened recall's log events after this seq."))] = 0,
           ) -> dict[str, Any]:
    limit = m.state.settings.api.max_query_chars
    if len(q) > limit:
        raise MemoryValidationError(f"q: longer than {limit} characters (api.max_query_chars)",
                                    [{"path": "q", "message": f"at most {limit} characters"}])
    if CONTROL_CHARS.search(q):
        raise MemoryValidationError("q: control characters or NUL bytes are not allowed",
                                    [{"path": "q", "message": "plain text only"}])
    # a scope view; restricted memories are never read over HTTP
    view = make_view(session_id, project_id, tags or [], tiers=tiers)
    check_as_of(as_of, utc_now())  # a 400 naming as_of, not an empty answer
    check_as_of(known_at, utc_now(), "known_at")
    bundle = m.client.recall(q, top_n=top_n, types=[t.value for t in types or ()] or None,
                             include_inactive=include_inactive, view=view, as_of=as_of,
                             known_at=known_at, latest=latest, route=route,
                             episodes=episodes, run_id=run_id,
                             conversation_id=conversation_id, log_after=log_after)
    return bundle.dump()


@router.get("/bulletin", openapi_extra={"security": SECURITY},
            summary="The bulletin to send with this message (live, else the last snapshot)")
def bulletin(m: Admitted,
             session_id: Annotated[str | None, Query(alias="sessionId")] = None,
             project_id: Annotated[str | None, Query(alias="projectId")] = None
             ) -> dict[str, Any]:
    make_view(session_id, project_id)  # the ids' checks, naming the field
    result = m.client.bulletin(session_id=session_id, project_id=project_id)
    return {**result.bulletin, "source": result.source, "warnings": result.warnings,
            "text": result.text}


@router.post("/context", openapi_extra={"security": SECURITY, **_body_doc("ContextBody")},
             summary="The prompt block (bulletin + relevant memories) for a purpose and query")
def context(m: Admitted, body: JsonBody) -> dict[str, Any]:
    request = _parse(ContextBody, body)
    ctx = m.client.context_for(request.purpose, request.query, session_id=request.session_id,
                               project_id=request.project_id, format=request.format,
                               max_chars=request.max_chars, max_tokens=request.max_tokens,
                               episodic=request.episodic)
    return {"purpose": ctx.purpose, "text": ctx.text, "memoryIds": ctx.bundle.memory_ids,
            "alwaysIds": [m.memory_id for m in ctx.always], "tiers": list(ctx.tiers),
            "bulletinSource": ctx.bulletin.source, "warnings": ctx.warnings}


@router.get("/stats", openapi_extra={"security": SECURITY},
            summary="Counts per type and status, sizes, last bulletin and ingest")
def stats(m: Admitted) -> dict[str, Any]:
    odb = m.client.databases.open(m.orchestrator_id, create=False)
    if odb is None:
        raise MemoryNotFound(f"orchestrator {m.orchestrator_id!r} has no memory yet")
    return memory_stats(odb)


# -- writes -----------------------------------------------------------------------


@router.post("/writeback", openapi_extra={"security": SECURITY,
                                          **_body_doc("WritebackRequest")},
             summary="Write back memories, a transcript, a workflow output or diagnostics")
async def writeback(m: Admitted, body: JsonBody, wait: Wait = True) -> Response:
    return await in_write_pool(m, wait, _writeback, body)


def _writeback(m: Member, body: Any) -> WriteHandle:
    _enabled(m)
    if isinstance(body, dict) and "requestedAt" in body:
        raise MemoryValidationError("requestedAt is set by the server",
                                    [{"path": "requestedAt", "message": "not allowed"}])
    if isinstance(body, dict) and "memories" in body:  # a memory's source defaults
        body = {**body, "memories": with_default_sources(body["memories"])}
    request = validate(WritebackRequest, body,
                       workspace=m.client.databases.workspace(m.orchestrator_id))
    data = request.dump()
    with m.state.writing(m.orchestrator_id):
        return m.client.write_back(
            memories=data.get("memories"), edges=data.get("edges"),
            transcript=data.get("channelTranscript"),
            workflow_output=data.get("workflowOutput"), diagnostics=data.get("diagnostics"),
            idempotency_key=data.get("idempotencyKey"),
            log_events=data.get("logEvents") or None)


@router.post("/supersede", openapi_extra={"security": SECURITY, **_body_doc("SupersedeBody")},
             summary="Replace a memory by another one (`by`) or by new `content`")
async def supersede(m: Admitted, body: JsonBody, wait: Wait = True) -> Response:
    edit = await checked_edit(m, SupersedeBody, body, _superseded_ids)
    return await in_write_pool(m, wait, _supersede, edit)


def _superseded_ids(edit: SupersedeBody) -> list[str]:
    if (edit.by is None) == (edit.content is None):
        raise MemoryValidationError("give exactly one of by or content",
                                    [{"path": "by", "message": "by or content, not both"}])
    return [edit.memory_id, *([edit.by] if edit.by else [])]


def _supersede(m: Member, edit: SupersedeBody) -> WriteHandle:
    _existing(m, _superseded_ids(edit))
    with m.state.writing(m.orchestrator_id):
        return m.client.supersede(edit.memory_id, by=edit.by, content=edit.content,
                                  reason=edit.reason)


@router.post("/retract", openapi_extra={"security": SECURITY, **_body_doc("RetractBody")},
             summary="Withdraw a memory (kept for the audit trail, left out of recall)")
async def retract(m: Admitted, body: JsonBody, wait: Wait = True) -> Response:
    edit = await checked_edit(m, RetractBody, body, lambda e: [e.memory_id])
    return await in_write_pool(m, wait, _retract, edit)


def _retract(m: Member, edit: RetractBody) -> WriteHandle:
    _existing(m, [edit.memory_id])
    with m.state.writing(m.orchestrator_id):
        return m.client.retract(edit.memory_id, edit.reason)


@router.post("/link", openapi_extra={"security": SECURITY, **_body_doc("LinkBody")},
             summary="Add a typed edge between two memories")
async def link(m: Admitted, body: JsonBody, wait: Wait = True) -> Response:
    edit = await checked_edit(m, LinkBody, body,
                              lambda e: [e.from_memory_id, e.to_memory_id])
    return await in_write_pool(m, wait, _link, edit)


def _link(m: Member, edit: LinkBody) -> WriteHandle:
    _existing(m, [edit.from_memory_id, edit.to_memory_id])
    with m.state.writing(m.orchestrator_id):
        return m.client.link(edit.from_memory_id, edit.to_memory_id, edit.edge_type.value,
                             weight=edit.weight, reason=edit.reason)


@router.post("/forget", openapi_extra={"security": SECURITY, **_body_doc("ForgetBody")},
             summary="Forget a memory: soft (retracted) or hard (its text erased)")
async def forget(m: Admitted, body: JsonBody, wait: Wait = True) -> Response:
    edit = await checked_edit(m, ForgetBody, body, lambda e: [e.memory_id])
    return await in_write_pool(m, wait, _forget, edit)


def _forget(m: Member, edit: ForgetBody) -> WriteHandle:
    _existing(m, [edit.memory_id])
    with m.state.writing(m.orchestrator_id):
        return m.client.forget(edit.memory_id, hard=edit.hard, reason=edit.reason)


@router.post("/recover", openapi_extra={"security": SECURITY, **_body_doc("RecoverBody")},
             summary="Make a soft-forgotten memory active again (not a hard-forgotten one)")
async def recover(m: Admitted, body: JsonBody, wait: Wait = True) -> Response:
    edit = await checked_edit(m, RecoverBody, body, lambda e: [e.memory_id])
    return await in_write_pool(m, wait, _recover, edit)


def _recover(m: Member, edit: RecoverBody) -> WriteHandle:
    # a hard-forgotten memory is not listed by get: the worker answers 410 (erased)
    with m.state.writing(m.orchestrator_id):
        return m.client.recover(edit.memory_id, reason=edit.reason, wait_for_memory_s=0)


@router.post("/ingest", openapi_extra={"security": SECURITY},
             summary="Scan the orchestrator's ingest folder now")
async def ingest(m: Admitted, wait: Wait = False) -> Response:
    return await in_write_pool(m, wait, _ingest)


def _ingest(m: Member) -> WriteHandle:
    _enabled(m)
    if not m.client.memory.ingest.enabled:
        raise MemoryDisabled("ingest is disabled for this orchestrator "
                             "(memory.ingest.enabled = false)")
    with m.state.writing(m.orchestrator_id):
        return m.client.ingest_now()


@router.api_route("", methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                  include_in_schema=False)
@router.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                  include_in_schema=False)
def unknown(m: Admitted) -> Response:
    """Any other path under an orchestrator: admitted first, so a probe learns nothing."""
    return json_error(404, error_body("not_found", "no such endpoint"))


# -- helpers ----------------------------------------------------------------------


def _enabled(m: Member) -> None:
    if not m.client.memory.enabled:
        raise MemoryDisabled(f"memory is disabled for {m.orchestrator_id!r} "
                             "(memory.enabled = false)")


def _existing(m: Member, memory_ids: list[str]) -> None:
    """Fail (404) unless every memory exists (after this server's own pending writes,
    which :func:`checked_edit` awaited)."""
    found = {n.memory_id for n in m.client.get(memory_ids)}
    missing = [i for i in memory_ids if i not in found]
    if missing:
        raise MemoryNotFound(f"no memory {missing[0]} in orchestrator {m.orchestrator_id!r}")


async def _answer(m: Member, handle: WriteHandle, wait: bool) -> Response:
    """200 with the worker's result, 202 while queued, or the worker's error."""
    if not handle.ok:
        if handle.outboxed:
            return JSONResponse({"ok": True, "queued": True, "outboxed": True,
                                 "idempotencyKey": handle.key,
                                 "warnings": [handle.message]}, status_code=202)
        code = handle.error or "broker_unavailable"
        return json_error(STATUS.get(code, 500), error_body(
            code, handle.message or "the request could not be published",
            handle.errors or None, idempotencyKey=handle.key))
    base = {"ok": True, "idempotencyKey": handle.key, "taskId": handle.task_id}
    timeout = m.state.settings.api.wait_timeout_s
    value = await outcome(handle, timeout, m.state.write_limiter) if wait else None
    if value is None:
        note = [] if not wait else [f"no result within {timeout:g}s: it stays queued"]
        return JSONResponse({**base, "queued": True, "warnings": note}, status_code=202)
    if not value.get("ok", True):
        code = code_of(str(value.get("error")))
        return json_error(STATUS.get(code, 500), error_body(
            code, str(value.get("message", "the task failed")), value.get("errors"),
            idempotencyKey=handle.key, taskId=handle.task_id))
    return JSONResponse({**base, "result": value})
