"""``MemoryClient.context_for``: the prompt block of the bulletin and the memories
relevant to a query, in orchmem's format or seed 001's ``[Relevant Memory]`` one, within
a character and/or token budget (issue 16; models/recall/context_budget.py).

A mixin: it uses the client's ``memory`` settings, ``bulletin``, ``recall``,
``orchestrator_id`` and ``working_memory`` (reflection_client.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from orchmem.config.settings import MemorySettings
from orchmem.models.recall.context import render_context
from orchmem.models.recall.context_budget import relevant_memory, within_budget
from orchmem.models.recall.search import RecallBundle
from orchmem.models.storage.visibility import make_view
from orchmem.worker.client.handles import BulletinResult, Context
from orchmem.worker.client.remote import empty_bundle

Purpose = Literal["selector", "step", "diagnostics"]


class ContextCalls:
    orchestrator_id: str
    memory: MemorySettings
    bulletin: Callable[..., BulletinResult]
    recall: Callable[..., RecallBundle]
    working_memory: Callable[[], str | None]

    def context_for(self, purpose: Purpose, query: str,
                    bulletin: BulletinResult | None = None, *, working: bool = False,
                    session_id: str | None = None, project_id: str | None = None,
                    format: str = "orchmem", max_chars: int | None = None,
                    max_tokens: int | None = None) -> Context:
        """The bulletin and the memories relevant to ``query``, as one bounded text block.

        ``purpose`` is "selector" (choosing a workflow), "step" (a workflow step) or
        "diagnostics" (an investigation: more memories, with their provenance). Pass the
        message's ``bulletin`` to avoid building it twice. ``working`` adds the
        working-memory projection (working.md) as a block of its own, first.

        Never raises for memory's own failures (they become ``warnings``), but raises
        ``ValueError`` for any other ``purpose``: that is a bug in the caller, not a
        condition to degrade around.
        """
        limits = self.memory.context
        top_n = {"selector": limits.selector_top_n, "step": limits.step_top_n,
                 "diagnostics": limits.diagnostics_top_n}.get(purpose)
        if top_n is None:
            raise ValueError(f"purpose must be selector, step or diagnostics, not {purpose!r}")
        if format not in ("orchmem", "relevant-memory"):
            raise ValueError(f"format must be orchmem or relevant-memory, not {format!r}")
        view = make_view(session_id, project_id)  # never restricted (storage/visibility.py)
        bulletin = bulletin or (self.bulletin(session_id=session_id, project_id=project_id)
                                if format == "orchmem" else BulletinResult({}, "", "empty"))
        bundle = self.recall(query, top_n=top_n, view=view) if top_n else empty_bundle(
            self.orchestrator_id, query, [])
        budget = min(max_chars or limits.max_chars, limits.max_chars)
        working_md = self.working_memory() if working else None
        text = within_budget(relevant_memory(bundle), budget, max_tokens) \
            if format == "relevant-memory" else within_budget(render_context(
                purpose, query, bulletin, bundle, budget,
                with_sources=purpose == "diagnostics", working=working_md).split("\n"),
                budget, max_tokens)
        return Context(purpose=purpose, text=text, bulletin=bulletin, bundle=bundle,
                       warnings=[*bulletin.warnings, *bundle.warnings])
