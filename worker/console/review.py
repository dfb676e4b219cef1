"""The review queue: pending evolves proposals with both memories side by side, the
relation and its confidence, accepted or rejected with a reason; open conflicts and
insights below. A proposal is shown only when the user's view sees both memories."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from starlette.responses import Response

from orchmem.models.storage.reflection.insights import open_insights
from orchmem.worker.console.access import Seen, Visitor
from orchmem.worker.console.layout import DONE, shown
from orchmem.worker.console.markup import Safe, hidden, join, link, render, table
from orchmem.worker.console.memories import memory_link
from orchmem.worker.console.memory import finish
from orchmem.worker.console.security import Refused, check_csrf, form

router = APIRouter(prefix="/console", include_in_schema=False)

CARD = """<article class="proposal card" aria-label="proposal {pid}"><h2>{relation}
<small>confidence {confidence}</small></h2><div class="pair">
<div><h3>Newer</h3><p class="text">{newer}</p></div>
<div><h3>Older</h3><p class="text">{older}</p></div></div><p>{reason}</p>
<form method="post" action="/console/review/{pid}">{csrf}
<label for="reason-{pid}">Reason</label><input id="reason-{pid}" name="reason" maxlength="500">
<button type="submit" name="decision" value="accept">Accept</button>
<button type="submit" name="decision" value="reject">Reject</button></form></article>"""


def _proposals(v: Visitor) -> Safe:
    cards = []
    for p in v.client.proposals("pending", limit=100):
        nodes = {n.memory_id: n for n in v.client.get([p["newerId"], p["olderId"]],
                                                      view=v.view(), purpose=v.purpose)}
        if p["newerId"] not in nodes or p["olderId"] not in nodes:
            continue
        cards.append(render(CARD, pid=p["proposalId"], relation=p["relation"],
                            confidence=f"{p['confidence']:.2f}", reason=p["reason"],
                            newer=memory_link(nodes[p["newerId"]]),
                            older=memory_link(nodes[p["olderId"]]),
                            csrf=hidden("csrf", v.session.csrf)))
    return join(cards) if cards else Safe("<p>No pending proposals.</p>")


def _insights(v: Visitor) -> Safe:
    odb = v.client.databases.open(v.orchestrator_id, create=False)
    if odb is None:
        return Safe("")
    rows: list[list[Any]] = []
    for insight in open_insights(odb, 100):
        seen = {n.memory_id: n for n in v.client.get(insight["memoryIds"], view=v.view(),
                                                     purpose=v.purpose)}
        if len(seen) != len(set(insight["memoryIds"])):
            continue  # it names a memory this view does not see
        rows.append([insight["kind"], join((memory_link(n) for n in seen.values()), " · "),
                     insight.get("reason") or "", insight["createdAt"]])
    return table(["Kind", "Memories", "Reason", "Since"], rows, "Open conflicts and insights")


@router.get("/review")
def review(v: Seen, done: str = "") -> Response:
    body = Safe(_proposals(v) + _insights(v)
                + render("<p>{l}</p>", l=link("/console/memories", "Back to memories")))
    return shown(v, "Review queue", body, "/console/review", DONE.get(done, ""))


@router.post("/review/{proposal_id}")
async def decide(request: Request, v: Seen,
                 proposal_id: str = PathParam(max_length=80)) -> Response:
    fields = await form(request)
    check_csrf(v.session, fields)
    decision = fields.get("decision")
    if decision not in ("accept", "reject"):
        raise Refused(400, "decision: accept or reject")
    reason = fields.get("reason", "").strip()[:500] or None
    return await anyio.to_thread.run_sync(_decide, v, proposal_id, decision, reason)


def _decide(v: Visitor, proposal_id: str, decision: str, reason: str | None) -> Response:
    found = [p for p in v.client.proposals(None, limit=1000) if p["proposalId"] == proposal_id]
    ids = [found[0]["newerId"], found[0]["olderId"]] if found else []
    if not found or len(v.client.get(ids, view=v.view(), purpose=v.purpose)) != 2:
        raise Refused(404, "no such proposal")
    with v.state.writing(v.orchestrator_id):
        handle = (v.client.accept if decision == "accept" else v.client.reject)(
            proposal_id, reason=reason)
        return finish(v, handle, f"/console/review?done={decision}ed")
