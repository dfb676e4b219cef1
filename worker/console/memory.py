"""One memory: its fields, provenance, edges (as a graph), Updates/Contradicts chain and
audit history, with the actions supersede, retract, patch (summary, tags, tier,
sensitivity in place), link (a typed edge to another memory) and forget (a hard forget
only after a confirmation page that names what will be erased and asks for the id)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from starlette.responses import RedirectResponse, Response

from orchmem.config import MemoryNotFound, OrchmemError, ScopeViolation
from orchmem.models.core.governance_fields import Sensitivity, Tier
from orchmem.models.core.shapes import EdgeType, MemoryEdge, MemoryNode
from orchmem.models.governance.history import history
from orchmem.worker.console.access import Seen, Visitor
from orchmem.worker.console.graph import edge_graph
from orchmem.worker.console.layout import DONE, shown
from orchmem.worker.console.login import purpose_form
from orchmem.worker.console.markup import Safe, hidden, join, link, pretty, render, table
from orchmem.worker.console.memories import short
from orchmem.worker.console.security import Refused, check_csrf, form

router = APIRouter(prefix="/console", include_in_schema=False)
MemoryId = PathParam(max_length=80)
FIELDS = ("memoryId", "type", "status", "importance", "confidence", "tier", "scope",
          "sessionId", "projectId", "sensitivity", "tags", "topic", "createdAt", "updatedAt",
          "validFrom", "validTo", "metadata")


def read(v: Visitor, memory_id: str) -> dict[str, Any]:
    """The memory's history as the user's view sees it; 404 otherwise."""
    odb = v.client.databases.open(v.orchestrator_id, create=False)
    if odb is None:
        raise Refused(404, "this orchestrator has no memory yet")
    try:
        return history(odb, memory_id, v.view(), requester=v.requester, purpose=v.purpose)
    except (MemoryNotFound, ScopeViolation, OrchmemError):
        raise Refused(404, "no such memory in this orchestrator (or not visible without "
                      "stating a purpose)") from None


def _fields(memory: dict[str, Any]) -> Safe:
    rows = join(render("<tr><th scope=\"row\">{k}</th><td>{v}</td></tr>", k=k,
                       v=pretty(memory.get(k)) if isinstance(memory.get(k), dict | list)
                       else memory.get(k)) for k in FIELDS)
    return Safe(f"<table class=\"fields\"><caption>Fields</caption>{rows}</table>")


def _sources(data: dict[str, Any]) -> Safe:
    rows = [[s["sourceType"], s.get("sourcePath") or "", s.get("conversationId") or "",
             link(f"/console/log/{s['workflowRunId']}", s["workflowRunId"])
             if s.get("workflowRunId") else "", s.get("stepId") or "", s["capturedBy"],
             s["capturedAt"]] for s in data["sources"]]
    return table(["Source", "File", "Conversation", "Run", "Step", "Captured by", "At"],
                 rows, "Provenance")


def _chain(data: dict[str, Any], others: dict[str, MemoryNode]) -> Safe:
    me = data["memory"]["memoryId"]
    rows = []
    for e in data["edges"]:
        if e["edgeType"] not in ("Updates", "Contradicts"):
            continue
        other = e["toMemoryId"] if e["fromMemoryId"] == me else e["fromMemoryId"]
        says = (f"this {e['edgeType']} the other" if e["fromMemoryId"] == me
                else f"the other {e['edgeType']} this")
        node = others.get(other)
        rows.append([e["edgeType"], says, link(f"/console/memories/{other}",
                                               short(node.content, 80) if node else other),
                     node.status.value if node else "", e.get("reason") or ""])
    return table(["Edge", "Direction", "Memory", "Status", "Reason"], rows,
                 "Updates / Contradicts chain")


def _events(data: dict[str, Any]) -> Safe:
    rows = [[e["at"], e["op"], e["actor"], e.get("reason") or "",
             Safe("<pre>" + pretty(e.get("before")) + "</pre>"),
             Safe("<pre>" + pretty(e.get("after")) + "</pre>")] for e in data["events"]]
    return table(["At", "Operation", "Actor", "Reason", "Before", "After"], rows,
                 "Audit history")


ACTIONS = """<section aria-labelledby="actions"><h2 id="actions">Actions</h2>
<form method="post" action="/console/memories/{id}/supersede">{csrf}
<label for="content">New content</label><textarea id="content" name="content" required
maxlength="20000"></textarea><label for="sreason">Reason</label>
<input id="sreason" name="reason" maxlength="500"><button type="submit">Supersede</button></form>
<form method="post" action="/console/memories/{id}/retract">{csrf}
<label for="rreason">Reason</label><input id="rreason" name="reason" required maxlength="500">
<button type="submit">Retract</button></form>
<form method="post" action="/console/memories/{id}/patch">{csrf}
<p>Change in place (empty fields stay as they are; new content is a supersede):</p>
<label for="psummary">Summary</label><input id="psummary" name="summary" maxlength="280">
<label for="ptags">Tags (comma-separated)</label><input id="ptags" name="tags" maxlength="2000">
<label for="ptier">Tier</label><select id="ptier" name="tier">{tiers}</select>
<label for="psensitivity">Sensitivity</label>
<select id="psensitivity" name="sensitivity">{sensitivities}</select>
<label for="preason">Reason</label><input id="preason" name="reason" maxlength="500">
<button type="submit">Patch</button></form>
<form method="post" action="/console/memories/{id}/link">{csrf}
<label for="lto">Link to memory id</label><input id="lto" name="to" required maxlength="80">
<label for="ltype">Edge type</label><select id="ltype" name="edgeType">{edge_types}</select>
<label for="lreason">Reason</label><input id="lreason" name="reason" maxlength="500">
<button type="submit">Link</button></form>
<form method="post" action="/console/memories/{id}/forget">{csrf}
<label for="freason">Reason</label><input id="freason" name="reason" maxlength="500">
<button type="submit">Forget (soft)</button></form>
<p><a href="/console/memories/{id}/forget" class="danger">Forget for good (hard)…</a></p>
</section>"""


@router.get("/memories/{memory_id}")
def memory_page(v: Seen, memory_id: str = MemoryId, done: str = "") -> Response:
    data = read(v, memory_id)
    mem = data["memory"]
    ids = {end for e in data["edges"] for end in (e["fromMemoryId"], e["toMemoryId"])}
    others = {n.memory_id: n for n in v.client.get(sorted(ids - {memory_id}), view=v.view(),
                                                   purpose=v.purpose)}
    node = v.client.get([memory_id], view=v.view(), purpose=v.purpose)
    edges = [MemoryEdge.model_validate(e) for e in data["edges"]]
    erased = mem.get("forgotten")
    body = join([
        render("<p class=\"erased\">This memory was forgotten for good: only its tombstone "
               "remains.</p>") if erased else "",
        render("<section class=\"content\"><h2>Content</h2><p class=\"text\">{c}</p>"
               "<h2>Summary</h2><p class=\"text\">{s}</p></section>",
               c=mem.get("content"), s=mem.get("summary")),
        _fields(mem), _sources(data),
        render("<section aria-labelledby=\"graph-h\"><h2 id=\"graph-h\">Edges</h2>{g}</section>",
               g=edge_graph(node[0], edges, others)) if node else "",
        _chain(data, others), _events(data), purpose_form(v, f"/console/memories/{memory_id}"),
        "" if erased else _actions(v, memory_id)])
    return shown(v, f"Memory {memory_id}", body, "/console/memories", DONE.get(done, ""))


def _options(values: list[str], blank: bool) -> Safe:
    """``<option>``s of ``values`` (first an empty "unchanged" one when ``blank``)."""
    empty = [render("<option value=\"\">(unchanged)</option>")] if blank else []
    return join(empty + [render("<option value=\"{x}\">{x}</option>", x=x) for x in values])


def _actions(v: Visitor, memory_id: str) -> Safe:
    return render(ACTIONS, id=memory_id, csrf=hidden("csrf", v.session.csrf),
                  tiers=_options([t.value for t in Tier], True),
                  sensitivities=_options([x.value for x in Sensitivity], True),
                  edge_types=_options([e.value for e in EdgeType], False))


CONFIRM = """<section class="card danger-zone"><p>A hard forget of <strong>{id}</strong>
erases, for good:</p><ul>
<li>its content: “{content}”, and its summary: “{summary}”;</li>
<li>its vector and its sources ({sources} of them), its words in the full-text index;</li>
<li>its words in the audit trail (event subjects, the reasons of its {edges} edges);</li>
<li>the finished entries of the outbox, dead letters, processed ingest files and stored
results that carry it, and the broker's old messages.</li></ul>
<p>One tombstone (its id and the time) remains. This cannot be undone.</p>
<form method="post" action="/console/memories/{id}/forget">{csrf}
<input type="hidden" name="hard" value="1">
<label for="confirm">Type the memory id to confirm</label>
<input id="confirm" name="confirm" required autocomplete="off">
<label for="hreason">Reason</label><input id="hreason" name="reason" maxlength="500">
<button type="submit" class="danger" data-expect="{id}">Erase this memory</button>
<a href="/console/memories/{id}">Cancel</a></form></section>"""


@router.get("/memories/{memory_id}/forget")
def confirm_forget(v: Seen, memory_id: str = MemoryId) -> Response:
    data = read(v, memory_id)
    mem = data["memory"]
    body = render(CONFIRM, id=memory_id, content=short(mem["content"], 300),
                  summary=short(mem["summary"], 200), sources=len(data["sources"]),
                  edges=len(data["edges"]), csrf=hidden("csrf", v.session.csrf))
    return shown(v, "Forget for good?", body, "/console/memories")


def finish(v: Visitor, handle: Any, back: str) -> Response:
    """Wait for the worker's answer to a write; the page it lands on, or the refusal."""
    if not handle.ok:
        raise Refused(409 if handle.error != "disabled" else 403,
                      handle.message or "the request could not be sent")
    value = handle.wait(v.state.settings.api.wait_timeout_s)
    if value is None:
        raise Refused(202, "queued: the worker has not answered yet; reload later")
    if not value.get("ok", True):
        raise Refused(409, str(value.get("message", "the worker refused the request")))
    return RedirectResponse(back, status_code=303)


@router.post("/memories/{memory_id}/{action}")
async def act(request: Request, v: Seen, action: str, memory_id: str = MemoryId) -> Response:
    fields = await form(request)
    check_csrf(v.session, fields)
    return await anyio.to_thread.run_sync(_act, v, memory_id, action, fields)


def _act(v: Visitor, memory_id: str, action: str, fields: dict[str, str]) -> Response:
    read(v, memory_id)  # 404 for a memory the user does not see
    reason = fields.get("reason", "").strip()[:500] or None
    page_of = f"/console/memories/{memory_id}"
    with v.state.writing(v.orchestrator_id):
        if action == "supersede":
            content = fields.get("content", "").strip()
            if not content:
                raise Refused(400, "content: the new content is required")
            return finish(v, v.client.supersede(memory_id, content=content, reason=reason),
                          page_of + "?done=superseded")
        if action == "retract":
            if not reason:
                raise Refused(400, "reason: a retraction needs a reason")
            return finish(v, v.client.retract(memory_id, reason), page_of + "?done=retracted")
        if action == "patch":
            return finish(v, v.client.patch(memory_id, reason=reason, **_patch_fields(fields)),
                          page_of + "?done=patched")
        if action == "link":
            to_id, edge_type = _link_fields(v, memory_id, fields)
            return finish(v, v.client.link(memory_id, to_id, edge_type, reason=reason),
                          page_of + "?done=linked")
        if action == "forget":
            hard = fields.get("hard") == "1"
            if hard and fields.get("confirm", "").strip() != memory_id:
                raise Refused(400, "confirm: type the memory id to erase it")
            return finish(v, v.client.forget(memory_id, hard=hard, reason=reason),
                          "/console/memories?done=erased" if hard
                          else page_of + "?done=forgotten")
    raise Refused(404, "no such action")


def _patch_fields(fields: dict[str, str]) -> dict[str, Any]:
    """The fields a patch form changes (the non-empty ones), checked; 400 naming the field."""
    changes: dict[str, Any] = {}
    summary = fields.get("summary", "").strip()
    if summary:
        if len(summary) > 280:
            raise Refused(400, "summary: at most 280 characters")
        changes["summary"] = summary
    if fields.get("tags", "").strip():
        changes["tags"] = [t.strip() for t in fields["tags"].split(",") if t.strip()]
    for name, allowed in (("tier", Tier), ("sensitivity", Sensitivity)):
        value = fields.get(name, "").strip()
        if value:
            if value not in {x.value for x in allowed}:
                raise Refused(400, f"{name}: one of " + ", ".join(x.value for x in allowed))
            changes[name] = value
    if not changes:
        raise Refused(400, "summary: change at least one of summary, tags, tier, sensitivity")
    return changes


def _link_fields(v: Visitor, memory_id: str, fields: dict[str, str]) -> tuple[str, str]:
    """The link form's target memory (one the user sees) and edge type; 400 otherwise."""
    to_id = fields.get("to", "").strip()
    if not to_id or len(to_id) > 80:
        raise Refused(400, "to: the id of the memory to link to is required")
    if to_id == memory_id:
        raise Refused(400, "to: a memory cannot be linked to itself")
    try:
        read(v, to_id)
    except Refused:
        raise Refused(400, "to: no such memory in this orchestrator") from None
    edge_type = fields.get("edgeType", "")
    if edge_type not in {e.value for e in EdgeType}:
        raise Refused(400, "edgeType: one of " + ", ".join(e.value for e in EdgeType))
    return to_id, edge_type
