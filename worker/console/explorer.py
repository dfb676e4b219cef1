"""The recall explorer: a query with its options, and for every returned memory why it
ranked where it did: the router's plan, each list's rank (vector, full text), the
fusion (RRF), the modifiers and the relevance floor, from the recall bundle itself."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from starlette.responses import Response

from orchmem.config import MemoryValidationError
from orchmem.models.recall.bundle import RecallBundle
from orchmem.worker.console.access import Seen, Visitor
from orchmem.worker.console.layout import shown
from orchmem.worker.console.markup import Safe, join, pretty, render, table
from orchmem.worker.console.memories import field, memory_link
from orchmem.worker.console.security import Refused

router = APIRouter(prefix="/console", include_in_schema=False)
Text = Annotated[str, Query(max_length=200)]

FORM = """<form method="get" action="/console/recall" class="filters" role="search">{q}{session}
{project}{as_of}<label>Top <input name="top_n" type="number" min="1" max="100"
value="{top_n}"></label><label><input type="checkbox" name="latest" value="1"{latest}>
Latest (heads of Updates chains)</label><label>Route <select name="route">
<option value="">default</option><option value="1"{on}>on</option>
<option value="0"{off}>off</option></select></label>
<button type="submit">Recall</button></form>"""


def _form(args: dict[str, str]) -> Safe:
    chosen = Safe(" selected")
    return render(FORM, q=field("q", "Query", args["q"], "search"),
                  session=field("session", "Session", args["session"]),
                  project=field("project", "Project", args["project"]),
                  as_of=field("as_of", "As of (ISO time with zone)", args["as_of"]),
                  top_n=args["top_n"], latest=Safe(" checked") if args["latest"] else "",
                  on=chosen if args["route"] == "1" else "",
                  off=chosen if args["route"] == "0" else "")


def _floor(v: Visitor, cosine: float | None, text_rank: int | None) -> str:
    params = v.client.memory.retrieval
    floor = params.min_similarity_text if text_rank is not None else params.min_similarity
    if cosine is None:
        return f"no vector (floor {floor:g})"
    return f"{cosine:.3f} {'≥' if cosine >= floor else '<'} {floor:g}"


def _ranks(v: Visitor, bundle: RecallBundle) -> Safe:
    rows: list[list[Any]] = []
    for item in bundle.nodes:
        s = item.scores
        rows.append([item.rank, memory_link(item.memory), s.vector_rank or "-",
                     s.text_rank or "-", f"{s.rrf:.4f}", f"x{s.importance:.2f}",
                     f"x{s.recency:.2f}", f"x{s.confidence:.2f}", f"x{s.contradiction:.2f}",
                     f"x{s.intent:.2f}", _floor(v, s.vector_cosine, s.text_rank),
                     f"{s.score:.4f}"])
    return table(["Rank", "Memory", "Vector rank", "Full-text rank", "Fusion (RRF)",
                  "Importance", "Recency", "Confidence", "Contradiction", "Intent",
                  "Cosine vs floor", "Score"], rows, "Why each memory ranked where it did")


def _plan(bundle: RecallBundle) -> Safe:
    plan = bundle.plan or {}
    inner = plan.get("plan") if isinstance(plan.get("plan"), dict) else None
    rows = [[k, Safe("<pre>" + pretty(x) + "</pre>") if isinstance(x, dict | list) else x]
            for k, x in sorted({**plan, **(inner or {})}.items()) if k != "plan"]
    facts: list[list[object]] = [["mode", bundle.mode], ["vector search", bundle.vector_available],
             *[[f"candidates: {k}", n] for k, n in sorted(bundle.candidates.items())],
             ["took", f"{bundle.took_ms:.1f} ms"]]
    return Safe(table(["", "Value"], facts, "The search")
                + table(["Plan", "Value"], rows, "The router's plan"
                        if rows else "No plan (the router is off)"))


@router.get("/recall")
def explorer(v: Seen, q: Text = "", session: Text = "", project: Text = "", as_of: Text = "",
             top_n: Annotated[int, Query(ge=1, le=100)] = 10, latest: Text = "",
             route: Text = "") -> Response:
    args = {"q": q.strip(), "session": session, "project": project, "as_of": as_of,
            "top_n": str(top_n), "latest": latest, "route": route}
    body = _form(args)
    if args["q"]:
        try:
            bundle = v.client.recall(args["q"], top_n=top_n, view=v.view(session, project),
                                     purpose=v.purpose, as_of=as_of or None,
                                     latest=bool(latest),
                                     route={"1": True, "0": False}.get(route))
        except MemoryValidationError as exc:
            raise Refused(400, str(exc)) from None
        warn = join(render("<p class=\"warning\">{w}</p>", w=w) for w in bundle.warnings)
        body = Safe(body + warn + _plan(bundle) + _ranks(v, bundle))
    return shown(v, "Recall explorer", body, "/console/recall")
