"""Injection by tier: which tiers ``context_for``'s block holds, and why
(docs/concepts/recall.md#injection-by-tier).

- The ``always_tiers`` (procedural: how to work) are in every block, first, bounded
  by ``always_max``: the newest active ones the reader sees, whatever the query.
- The ``recalled_tiers`` (profile, semantic) are recalled for the query.
- The ``on_request_tiers`` (episodic: what happened) join the recall when the router
  classifies the query as one of ``on_request_intents`` (what happened, a similar past
  case), or when the caller asks (``episodic=True``; ``False`` keeps them out).

The settings are ``memory.context.*`` (config/memory_settings.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from orchmem.config.memory_settings import ContextSettings
from orchmem.models.recall.router import plan as route_plan


@dataclass(frozen=True)
class Injection:
    """The tiers a block recalls for its query, and why the on-request ones joined."""

    recalled: tuple[str, ...]
    #: "asked", "router: <intent>", or None when they did not join.
    reason: str | None


def injection(settings: ContextSettings, query: str, episodic: bool | None,
              now: datetime) -> Injection:
    """The tiers to recall for ``query`` (see the module)."""
    base = tuple(dict.fromkeys(settings.recalled_tiers))
    extra = tuple(t for t in dict.fromkeys(settings.on_request_tiers) if t not in base)
    if episodic is False or not extra:
        return Injection(base, None)
    if episodic:
        return Injection(base + extra, "asked")
    intent = route_plan(query, now).intent.value
    if intent in settings.on_request_intents:
        return Injection(base + extra, f"router: {intent}")
    return Injection(base, None)
