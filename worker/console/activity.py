"""The overview (counts, last bulletin, ingest and reflection, projection lag, degraded
state), the execution log (runs, their steps and tool calls, and the memories each
step produced), ingest outcomes, and the bulletin with working.md."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi import Path as PathParam
from starlette.responses import Response

from orchmem.models.storage.db.stats import stats as memory_stats
from orchmem.models.storage.delivery.manifest import recent_entries
from orchmem.models.storage.execlog.entries import read_log, recent_runs, run_of
from orchmem.models.storage.search.browse import Filters, browse
from orchmem.worker.console.access import Seen, Visitor
from orchmem.worker.console.layout import shown
from orchmem.worker.console.markup import Safe, join, link, pretty, render, table
from orchmem.worker.console.security import Refused

router = APIRouter(prefix="/console", include_in_schema=False)
NO_MEMORY = Safe("<p>This orchestrator has no memory yet.</p>")


def _counts(title: str, counts: dict[str, Any]) -> Safe:
    return table([title, "Memories"], sorted(counts.items()), f"By {title.lower()}")


def _overview(v: Visitor) -> Safe:
    odb = v.client.databases.open(v.orchestrator_id, create=False)
    if odb is None:
        return NO_MEMORY
    data = memory_stats(odb)
    gov = data["governance"]
    by_type = {t: ", ".join(f"{s} {n}" for s, n in sorted(c.items()))
               for t, c in data["byType"].items()}
    mark = data["watermark"]
    reflection = data.get("reflection") or {}
    lag = [["log seq", mark["log"]["seq"]], ["episodes behind (runs)",
                                            mark["episodes"]["behindRuns"]],
           ["vectors behind (memories)", mark["vectors"]["behindMemories"]],
           ["full text behind (memories)", mark["fts"]["behindMemories"]],
           ["bulletin behind (changes)", mark["bulletin"]["behindChanges"]]]
    last = [["memories", data["memories"]], ["last bulletin", data["lastBulletinAt"] or "-"],
            ["last ingest", data["lastIngestAt"] or "-"],
            ["last reflection", reflection.get("lastReflectAt") or "-"],
            ["last change", data["lastEventAt"] or "-"],
            ["embeddings missing", data["embeddingsMissing"]],
            ["dead letters", data["deadLetters"]], ["memory enabled", v.client.memory.enabled]]
    degraded = data.get("degraded")
    state = (render("<p class=\"warning\" role=\"alert\">Degraded (read-only): {r}</p>",
                    r=degraded.get("reason")) if degraded else
             Safe("<p class=\"ok\">Healthy: not degraded.</p>"))
    return Safe(state + table(["", ""], last, "State") + _counts("Type", by_type)
                + _counts("Status", data["byStatus"]) + _counts("Tier", gov["byTier"])
                + _counts("Scope", gov["byScope"])
                + _counts("Sensitivity", gov["bySensitivity"])
                + table(["Projection", "Lag"], lag, "Projection lag"))


@router.get("/")
def overview(v: Seen) -> Response:
    return shown(v, f"Orchestrator {v.orchestrator_id}", _overview(v), "/console/")


@router.get("/log")
def runs(v: Seen) -> Response:
    odb = v.client.databases.open(v.orchestrator_id, create=False)
    if odb is None:
        return shown(v, "Execution log", NO_MEMORY, "/console/log")
    rows = [[link(f"/console/log/{r['runId']}", r["runId"]), r.get("name") or "",
             r.get("status") or "", r.get("outcome") or "", r["replay"], r.get("events"),
             r.get("startedAt") or "", r.get("endedAt") or ""] for r in recent_runs(odb)]
    body = table(["Run", "Name", "Status", "Outcome", "Replay", "Events", "Started", "Ended"],
                 rows, "Runs, newest first")
    return shown(v, "Execution log", body, "/console/log")


@router.get("/log/{run_id}")
def run_page(v: Seen, run_id: str = PathParam(max_length=200)) -> Response:
    odb = v.client.databases.open(v.orchestrator_id, create=False)
    run = run_of(odb, run_id) if odb is not None else None
    if odb is None or run is None:
        raise Refused(404, "no such run")
    events, _ = read_log(odb, run_id=run_id, limit=500)
    rows = [[e["seq"], e.get("stepId") or "", e.get("kind") or "", e.get("name") or "",
             e.get("status") or "", e.get("actor") or "", e.get("text") or "",
             Safe("<pre>" + pretty(e.get("data")) + "</pre>") if e.get("data") else "",
             e.get("checkpointRef") or "", e["at"]] for e in events]
    facts = table(["", ""], sorted((k, x) for k, x in run.items()), "Run")
    body = Safe(facts + table(["Seq", "Step", "Kind", "Name", "Status", "Actor", "Text", "Data",
                               "Checkpoint", "At"], rows, "Steps, tool calls, checkpoints")
                + _step_memories(v, run_id))
    return shown(v, f"Run {run_id}", body, "/console/log")


def _step_memories(v: Visitor, run_id: str) -> Safe:
    """The memories (that the view sees) the run's steps produced, by their source."""
    odb = v.client.databases.open(v.orchestrator_id, create=False)
    if odb is None:
        return Safe("")
    nodes, _ = browse(odb, Filters(status=None), v.view(), limit=500)
    made = [n for n in nodes if n.source.workflow_run_id == run_id]
    rows = [[n.source.step_id or "", link(f"/console/memories/{n.memory_id}",
                                          n.content[:120] or "(erased)"), n.type.value]
            for n in made]
    return table(["Step", "Memory", "Type"], rows, "Memories this run's steps produced")


@router.get("/ingest")
def ingest(v: Seen) -> Response:
    odb = v.client.databases.open(v.orchestrator_id, create=False)
    if odb is None:
        return shown(v, "Ingest", NO_MEMORY, "/console/ingest")
    rows = [[e["file"], e["outcome"], e.get("reason") or "", e.get("detail") or "",
             join((link(f"/console/memories/{m}", m) for m in e["memoryIds"]), " "),
             e["size"], e["at"]] for e in recent_entries(odb)]
    return shown(v, "Ingest", table(["File", "Outcome", "Reason code", "Detail", "Memories",
                                     "Bytes", "At"], rows, "Processed and rejected files"),
                 "/console/ingest")


@router.get("/bulletin")
def bulletin(v: Seen) -> Response:
    result = v.client.bulletin(timeout=5)
    working = v.client.working_memory()
    warn = join(render("<p class=\"warning\">{w}</p>", w=w) for w in result.warnings)
    body = render("<p>Source: {s}</p>{warn}<h2>Bulletin</h2><pre class=\"text\">{b}</pre>"
                  "<h2>working.md</h2><pre class=\"text\">{w}</pre>", s=result.source,
                  warn=warn, b=result.text or "(empty)",
                  w=working or "(not written yet: the first reflection writes it)")
    return shown(v, "Bulletin", body, "/console/bulletin")
