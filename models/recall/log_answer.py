"""*What happened?* reads the execution log (docs/concepts/recall.md#what-happened-reads-the-log).

A recall the router classifies as *what happened*, or one that names a run
(``run_id``), also returns the log events that answer it, beside the memories, in
``bundle.log``: the events of the runs it is about, in append (chronological) order,
at most ``memory.log.answer_max_events`` a page (``log_after``: the cursor ``next`` of
the page before), of at most ``memory.log.answer_max_runs`` runs. The runs are:

- the run named, when the recall names one;
- else the runs the recalled memories came from (their sources), and the runs started
  in the question's time window (the router's);
- else, or when the projections lag the log past ``memory.log.max_projection_lag``
  (memories and episodes may not know the newest runs yet), the latest runs too: the
  log answers directly, and ``warnings`` says so.

Only runs the reader's view sees (models/storage/execlog/answers.py) are read. The plan
lists the sources read and why (``plan.sources``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchmem.config.memory_settings import ExecLogSettings
from orchmem.models.recall.router import Intent, Plan
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.execlog import answers
from orchmem.models.storage.visibility import View


@dataclass
class LogAnswer:
    """The bundle's ``log`` and the plan's ``sources`` entries for it."""

    log: dict[str, Any] | None = None
    sources: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def log_answer(odb: OrchestratorDB, settings: ExecLogSettings, plan: Plan | None,
               run_id: str | None, memory_ids: list[str], view: View, lagging: bool,
               after: int = 0) -> LogAnswer:
    """The log events answering this recall, or an empty :class:`LogAnswer` when it is
    not a *what happened* recall (see the module)."""
    happened = plan is not None and plan.intent == Intent.WHAT_HAPPENED
    if settings.answer_max_events == 0 or not (happened or run_id is not None):
        return LogAnswer()
    out = LogAnswer()
    if run_id is not None:
        runs = [run_id]
        out.sources.append({"source": "log", "why": "the recall names a run"})
    else:
        runs = _asked_runs(odb, plan, memory_ids, settings, lagging, out)
    seen = answers.visible_runs(odb, list(dict.fromkeys(runs)), view)
    seen = seen[-settings.answer_max_runs:]
    events, cursor = answers.events_of_runs(odb, seen, after, settings.answer_max_events)
    out.log = {"runs": seen, "events": events, "next": cursor}
    return out


def _asked_runs(odb: OrchestratorDB, plan: Plan | None, memory_ids: list[str],
                settings: ExecLogSettings, lagging: bool, out: LogAnswer) -> list[str]:
    """The runs a *what happened* question is about, and why each source was read."""
    runs = answers.runs_of_memories(odb, memory_ids)
    why = "the router classified the question as what happened"
    if runs:
        out.sources.append({"source": "log", "why": f"{why}: the runs the recalled "
                            "memories came from"})
    if plan is not None and plan.window is not None:
        start, end = plan.window
        dated = answers.runs_between(odb, start.isoformat(),
                                     f"{end.isoformat()}T\uffff", settings.answer_max_runs)
        if dated:
            runs += dated
            out.sources.append({"source": "log", "why": f"{why}: the runs of the days "
                                "it asks about"})
    if lagging or not runs:
        runs += answers.runs_between(odb, None, None, settings.answer_max_runs)
        out.sources.append({"source": "log", "why": f"{why}: the latest runs"
                            + (" (projections lag the log)" if lagging else "")})
    if lagging:
        out.warnings.append("projections lag the execution log past "
                            f"memory.log.max_projection_lag = {settings.max_projection_lag}: "
                            "what happened is answered from the log directly (bundle.log)")
    return runs
