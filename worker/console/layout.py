"""The page shell: head, navigation, the user's orchestrator, the restricted banner."""

from __future__ import annotations

from starlette.responses import HTMLResponse

from orchmem.worker.console.access import Visitor
from orchmem.worker.console.markup import Safe, esc, hidden, join, link, render

#: (path under /console, label) of the main navigation, in order.
NAV = [("/console/", "Overview"), ("/console/memories", "Memories"),
       ("/console/recall", "Recall explorer"), ("/console/review", "Review"),
       ("/console/log", "Execution log"), ("/console/ingest", "Ingest"),
       ("/console/bulletin", "Bulletin")]

SHELL = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · orchmem console</title>
<link rel="stylesheet" href="/console/static/console.css">
<script src="/console/static/console.js" defer></script>
</head><body>
<a class="skip" href="#main">Skip to content</a>
<header><span class="brand">orchmem</span>{nav}{who}</header>
<main id="main" tabindex="-1"><h1>{title}</h1>{flash}{body}</main>
</body></html>"""


def who(orchestrator_id: str, csrf: str, purpose: str | None) -> Safe:
    """The orchestrator, the restricted state and the logout form."""
    state = (render("<span class=\"restricted-on\">restricted shown: {p}</span>", p=purpose)
             if purpose else Safe(""))
    return Safe(render("<div class=\"who\">orchestrator <strong>{o}</strong> ", o=orchestrator_id)
                + state + render(
                    "<form method=\"post\" action=\"/console/logout\" class=\"inline\">"
                    "{csrf}<button type=\"submit\">Log out</button></form></div>",
                    csrf=hidden("csrf", csrf)))


def page(title: str, body: Safe, *, current: str = "", orchestrator_id: str = "",
         csrf: str = "", purpose: str | None = None, flash: str = "",
         status: int = 200) -> HTMLResponse:
    """A whole page; without ``orchestrator_id`` (the login page) no navigation."""
    nav = Safe("")
    if orchestrator_id:
        items = join(Safe("<li>" + link(path, label, **({"aria_current": "page"}
                                                         if path == current else {})) + "</li>")
                     for path, label in NAV)
        nav = Safe(f"<nav aria-label=\"Main\"><ul>{items}</ul></nav>")
    note = render("<p class=\"flash\" role=\"status\">{f}</p>", f=flash) if flash else Safe("")
    text = SHELL.format(title=esc(title), nav=nav, flash=note, body=body,
                        who=who(orchestrator_id, csrf, purpose) if orchestrator_id else "")
    return HTMLResponse(text, status_code=status)


def shown(v: Visitor, title: str, body: Safe, current: str = "", flash: str = "") -> HTMLResponse:
    """A page of a logged-in user."""
    return page(title, body, current=current, orchestrator_id=v.orchestrator_id,
                csrf=v.session.csrf, purpose=v.purpose, flash=flash)


#: What a finished action says on the page it lands on (``?done=`` names one).
DONE = {"superseded": "Superseded: the new memory replaces this one.",
        "retracted": "Retracted: kept for the audit trail, left out of recall.",
        "forgotten": "Forgotten (soft): retracted, history kept.",
        "patched": "Patched: the fields changed in place (see the audit history).",
        "linked": "Linked: the new edge is in the graph.",
        "erased": "Erased: the memory's text, vector and sources are gone; a tombstone stays.",
        "accepted": "Proposal accepted.", "rejected": "Proposal rejected."}
