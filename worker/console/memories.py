"""The memories page: a filtered, paginated list, and a search box that runs a real
recall (the same call an orchestrator makes), both under the user's view."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query
from starlette.responses import Response

from orchmem.config import MemoryValidationError
from orchmem.models.core.governance_fields import Scope, Tier
from orchmem.models.core.shapes import MemoryNode, MemoryType, Status
from orchmem.models.governance.restricted_reads import audit_restricted_get
from orchmem.models.recall.bundle import RecallBundle
from orchmem.models.storage.search.browse import Filters, browse
from orchmem.worker.console.access import Seen, Visitor
from orchmem.worker.console.layout import DONE, shown
from orchmem.worker.console.login import purpose_form
from orchmem.worker.console.markup import Safe, join, link, render, table
from orchmem.worker.console.security import Refused

router = APIRouter(prefix="/console", include_in_schema=False)
PAGE_SIZE = 25
Text = Annotated[str, Query(max_length=200)]


def options(name: str, label: str, values: Sequence[str], chosen: str) -> Safe:
    """A labelled ``<select>`` with an "any" choice."""
    items = join(render("<option value=\"{v}\"{s}>{v}</option>", v=value,
                        s=Safe(" selected") if value == chosen else Safe(""))
                 for value in values)
    return render("<label>{label} <select name=\"{n}\"><option value=\"\">any</option>"
                  "{items}</select></label>", label=label, n=name, items=items)


def field(name: str, label: str, value: str, kind: str = "text") -> Safe:
    return render("<label>{l} <input name=\"{n}\" type=\"{k}\" value=\"{v}\"></label>",
                  l=label, n=name, k=kind, v=value)


def short(text: str, width: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def memory_link(node: MemoryNode) -> Safe:
    return link(f"/console/memories/{node.memory_id}", short(node.content) or "(erased)")


def _day(value: str, name: str, after: bool = False) -> str | None:
    if not value:
        return None
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise Refused(400, f"{name}: a date as YYYY-MM-DD") from None
    return (day + timedelta(days=1) if after else day).isoformat()


def filter_form(args: dict[str, str]) -> Safe:
    return Safe(
        "<form method=\"get\" action=\"/console/memories\" class=\"filters\" role=\"search\">"
        + field("q", "Search (recall)", args["q"], "search")
        + options("type", "Type", [t.value for t in MemoryType], args["type"])
        + options("status", "Status", [*(s.value for s in Status), "any"], args["status"])
        + options("tier", "Tier", [t.value for t in Tier], args["tier"])
        + options("scope", "Scope", [s.value for s in Scope], args["scope"])
        + field("session", "Session", args["session"]) + field("project", "Project",
                                                               args["project"])
        + field("tag", "Tag", args["tag"]) + field("from", "From", args["from"], "date")
        + field("to", "To", args["to"], "date")
        + "<button type=\"submit\">Apply</button></form>")


def node_rows(nodes: Sequence[MemoryNode]) -> list[list[object]]:
    return [[memory_link(n), n.type.value, n.status.value, n.tier.value if n.tier else "",
             n.scope.value if n.scope else "", n.sensitivity.value if n.sensitivity else "",
             n.created_at] for n in nodes]


HEADERS = ["Memory", "Type", "Status", "Tier", "Scope", "Sensitivity", "Created"]


def _listing(v: Visitor, args: dict[str, str], page_no: int) -> Safe:
    odb = v.client.databases.open(v.orchestrator_id, create=False)
    if odb is None:
        return Safe("<p>This orchestrator has no memory yet.</p>")
    status = args["status"] or "active"
    filters = Filters(types=(args["type"],) if args["type"] else (),
                      status=None if status == "any" else status, tier=args["tier"] or None,
                      scope=args["scope"] or None, session_id=args["session"] or None,
                      project_id=args["project"] or None,
                      created_from=_day(args["from"], "from"),
                      created_to=_day(args["to"], "to", after=True))
    view = v.view(args["session"], args["project"], [args["tag"]] if args["tag"] else [])
    nodes, total = browse(odb, filters, view, limit=PAGE_SIZE, offset=(page_no - 1) * PAGE_SIZE)
    if v.purpose:
        audit_restricted_get(odb, view, nodes, v.requester, v.purpose)
    pages = max(1, -(-total // PAGE_SIZE))
    keep = {k: x for k, x in args.items() if x}
    nav = join([link("/console/memories?" + urlencode({**keep, "page": page_no - 1}),
                     "← Previous", rel="prev") if page_no > 1 else "",
                render(" page {p} of {n} ({t} memories) ", p=page_no, n=pages, t=total),
                link("/console/memories?" + urlencode({**keep, "page": page_no + 1}),
                     "Next →", rel="next") if page_no < pages else ""])
    return Safe(table(HEADERS, node_rows(nodes), "Memories, newest first")
                + render("<p class=\"pager\">{n}</p>", n=nav))


def _search(v: Visitor, args: dict[str, str]) -> Safe:
    view = v.view(args["session"], args["project"], [args["tag"]] if args["tag"] else [])
    bundle: RecallBundle = v.client.recall(
        args["q"], top_n=PAGE_SIZE, types=[args["type"]] if args["type"] else None,
        include_inactive=args["status"] not in ("", "active"), view=view, purpose=v.purpose)
    rows = [[item.rank, memory_link(item.memory), item.memory.type.value,
             item.memory.status.value, f"{item.scores.score:.4f}"] for item in bundle.nodes]
    explain = link("/console/recall?" + urlencode({"q": args["q"]}),
                   "Why these? Open in the recall explorer")
    warn = join(render("<p class=\"warning\">{w}</p>", w=w) for w in bundle.warnings)
    return Safe(render("<p>{n} memories recalled for “{q}”. {e}</p>", n=len(bundle.nodes),
                       q=args["q"], e=explain) + warn
                + table(["Rank", "Memory", "Type", "Status", "Score"], rows, "Recalled"))


@router.get("/memories")
def memories(v: Seen, q: Text = "", type: Text = "", status: Text = "", tier: Text = "",
             scope: Text = "", session: Text = "", project: Text = "", tag: Text = "",
             from_: Annotated[str, Query(alias="from", max_length=20)] = "",
             to: Annotated[str, Query(max_length=20)] = "",
             page: Annotated[int, Query(ge=1, le=100_000)] = 1, done: Text = "") -> Response:
    args = {"q": q.strip(), "type": type, "status": status, "tier": tier, "scope": scope,
            "session": session, "project": project, "tag": tag, "from": from_, "to": to}
    try:
        body = _search(v, args) if args["q"] else _listing(v, args, page)
    except MemoryValidationError as exc:
        raise Refused(400, str(exc)) from None
    return shown(v, "Memories", Safe(filter_form(args) + purpose_form(v, "/console/memories")
                                     + body), "/console/memories", DONE.get(done, ""))
