"""The prompt block of :meth:`MemoryClient.context_for
<orchmem.worker.client.memory_client.MemoryClient.context_for>`: the bulletin, the
memories of the tiers injected for the query, the always-injected tiers and
working.md, as one bounded text (models/recall/context.py renders it)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from orchmem.config import OrchmemError
from orchmem.models.core.shapes import MemoryNode, utc_now
from orchmem.models.recall.bundle import RecallBundle
from orchmem.models.recall.context import render_context
from orchmem.models.recall.context_budget import count_tokens, relevant_memory, within_budget
from orchmem.models.recall.injection import injection
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.storage.visibility import View
from orchmem.models.telemetry import meters, names, spans
from orchmem.worker.client.handles import BulletinResult, Context
from orchmem.worker.client.remote import empty_bundle
from orchmem.worker.client.working import fresh_working

#: The purposes a context block is built for.
PURPOSES = ("selector", "step", "diagnostics")

if TYPE_CHECKING:
    from orchmem.worker.client.memory_client import MemoryClient


def build_context(client: MemoryClient, purpose: str, query: str,
                  bulletin: BulletinResult | None, *, working: bool, view: View,
                  format: str, max_chars: int | None, max_tokens: int | None,
                  episodic: bool | None, pressure: float | None) -> Context:
    """What ``context_for`` answers (its docstring says what each argument does).
    ``view`` is never restricted (models/storage/visibility.py). One span holds its
    budget and what the block used of it (lengths, never its text); the share used
    is recorded as ``orchmem.context.budget_use``."""
    known = purpose if purpose in PURPOSES else "invalid"  # never the caller's text
    with spans.span(names.SPAN_CONTEXT, {names.ORCHESTRATOR: client.orchestrator_id,
                                         names.CONTEXT_PURPOSE: known}) as span:
        context = _build(client, purpose, query, bulletin, working=working, view=view,
                         format=format, max_chars=max_chars, max_tokens=max_tokens,
                         episodic=episodic, pressure=pressure)
        if spans.enabled() or meters.recording():
            budget = min(max_chars or client.memory.context.max_chars,
                         client.memory.context.max_chars)
            tokens = count_tokens(context.text)
            span.update({names.BUDGET: budget, names.USED: len(context.text),
                         names.TOKENS_BUDGET: max_tokens or 0, names.TOKENS_USED: tokens,
                         names.HITS: len(context.bundle.nodes)})
            if max_tokens:
                meters.context_built(purpose, tokens, max_tokens, "tokens")
            else:
                meters.context_built(purpose, len(context.text), budget, "chars")
        return context


def _build(client: MemoryClient, purpose: str, query: str,
           bulletin: BulletinResult | None, *, working: bool, view: View,
           format: str, max_chars: int | None, max_tokens: int | None,
           episodic: bool | None, pressure: float | None) -> Context:
    limits = client.memory.context
    top_n = {"selector": limits.selector_top_n, "step": limits.step_top_n,
             "diagnostics": limits.diagnostics_top_n}.get(purpose)
    if top_n is None:
        raise ValueError(f"purpose must be selector, step or diagnostics, not {purpose!r}")
    if format not in ("orchmem", "relevant-memory"):
        raise ValueError(f"format must be orchmem or relevant-memory, not {format!r}")
    bulletin = bulletin or (client.bulletin(session_id=view.session_id, project_id=view.project_id)
                            if format == "orchmem" else BulletinResult({}, "", "empty"))
    # An investigation asks what happened: its block holds the episodic tiers too.
    asked = True if episodic is None and purpose == "diagnostics" else episodic
    tiers = injection(limits, query, asked, utc_now())
    bundle = _context_recall(client, query, top_n, replace(view, tiers=tiers.recalled),
                             pressure)
    always = _always(client, view) if format == "orchmem" else []
    budget = min(max_chars or limits.max_chars, limits.max_chars)
    working_md, working_warnings = fresh_working(client) if working else (None, [])
    text = within_budget(relevant_memory(bundle), budget, max_tokens) \
        if format == "relevant-memory" else within_budget(render_context(
            purpose, query, bulletin, bundle, budget,
            with_sources=purpose == "diagnostics", working=working_md,
            always=always).split("\n"), budget, max_tokens)
    return Context(purpose=purpose, text=text, bulletin=bulletin, bundle=bundle,
                   warnings=[*bulletin.warnings, *bundle.warnings, *working_warnings],
                   always=always, tiers=tiers.recalled, tiers_reason=tiers.reason)


def _always(client: MemoryClient, view: View) -> list[MemoryNode]:
    """The always-injected tiers' active memories ``view`` sees, newest first, at
    most ``memory.context.always_max`` (empty, logged, when memory cannot be read)."""
    limits = client.memory.context
    if not limits.always_tiers or not limits.always_max:
        return []
    try:
        odb = client.databases.open(client.orchestrator_id, create=False)
        return [] if odb is None else list_memories(
            odb, limit=limits.always_max,
            view=replace(view, tiers=tuple(dict.fromkeys(limits.always_tiers))))
    except OrchmemError as exc:
        client._warn("context", exc)
        return []


def _context_recall(client: MemoryClient, query: str, top_n: int, view: View,
                    pressure: float | None) -> RecallBundle:
    """The recall of a context block: none when ``top_n`` is 0, nor under context
    pressure with ``memory.context.recall_mode = "fallback"`` (said in its warnings)."""
    limits = client.memory.context
    skip = limits.recall_mode == "fallback" and pressure is not None \
        and pressure >= limits.pressure_threshold
    if top_n and not skip:
        return client.recall(query, top_n=top_n, view=view)
    return empty_bundle(client.orchestrator_id, query, [
        f"recall skipped under context pressure ({pressure:.2f} >= "
        f"{limits.pressure_threshold}, memory.context.recall_mode = fallback)"]
        if skip and pressure is not None else [])

