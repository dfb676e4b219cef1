"""The memory bulletin: a short, cited, deterministic digest sent with every message.

``build(odb, now)`` reads the :class:`Facts` the bulletin needs in one snapshot
(``storage.bulletin_reads.facts``); ``compose(facts, limits, now)`` is a pure
function of those values and the clock, so the same database state and the same
clock give the same bulletin, byte for byte. Sections, always in this order:

- ``knowledge_summary``: who the user is and what is known (Identity, then Fact, then
  recent Events and Observations), by importance;
- ``active_goals``, ``open_todos``: active Goals and Todos, by importance then age;
- ``recent_decisions``: active Decisions, newest first;
- ``preference_profile``: active Preferences, by importance;
- ``conflicts_and_uncertainties``: unresolved Contradicts edges (both ends active, as
  :mod:`orchmem.models.core.contradictions` defines it) and active memories under
  ``low_confidence``.

Every line cites its memoryIds. Limits (settings ``memory.bulletin``): at most
``max_items_per_section`` lines and ``max_chars_per_section`` characters per section,
``max_total_chars`` in all. Over the total, lines are dropped from the end of the
least protected section first (knowledge, then preferences, then conflicts); Goal,
Todo and Decision lines are the last to go.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from orchmem.config.memory_settings import BulletinSettings
from orchmem.models.bulletin.facts import Facts, Item
from orchmem.models.core.contradictions import unresolved
from orchmem.models.core.shapes import format_ts, parse_ts
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.search import bulletin_reads
from orchmem.models.storage.visibility import DEFAULT_VIEW, View
from orchmem.models.telemetry import names, spans

__all__ = ["SECTIONS", "Bulletin", "Line", "build", "compose"]

SECTIONS = ("knowledge_summary", "active_goals", "open_todos", "recent_decisions",
            "preference_profile", "conflicts_and_uncertainties")
#: Dropped first when the total is over the limit (Goal/Todo/Decision sections last).
DROP_ORDER = ("knowledge_summary", "preference_profile", "conflicts_and_uncertainties",
              "recent_decisions", "open_todos", "active_goals")
MAX_LINE_CHARS = 200
#: The snapshot files the bulletin task writes under ``bulletins/``.
SNAPSHOT_JSON, SNAPSHOT_MD = "latest.json", "latest.md"
TITLES = {
    "knowledge_summary": "Known", "active_goals": "Goals", "open_todos": "Open todos",
    "recent_decisions": "Recent decisions", "preference_profile": "Preferences",
    "conflicts_and_uncertainties": "Conflicts and uncertainties",
}


@dataclass(frozen=True)
class Line:
    text: str
    memory_ids: tuple[str, ...]

    def render(self) -> str:
        return f"- {self.text} [{', '.join(self.memory_ids)}]"


@dataclass
class Bulletin:
    orchestrator_id: str
    generated_at: str
    watermark: int
    sections: dict[str, list[Line]] = field(default_factory=dict)
    truncated: bool = False

    @property
    def memory_ids(self) -> list[str]:
        return sorted({m for lines in self.sections.values() for line in lines
                       for m in line.memory_ids})

    def to_dict(self) -> dict[str, Any]:
        return {
            "orchestratorId": self.orchestrator_id,
            "generatedAt": self.generated_at,
            "watermark": self.watermark,
            "truncated": self.truncated,
            "chars": len(self.to_text()),
            "sections": {name: [{"text": line.text, "memoryIds": list(line.memory_ids)}
                                for line in self.sections.get(name, [])]
                         for name in SECTIONS},
        }

    def to_text(self) -> str:
        """The compact block for a prompt: one heading per non-empty section."""
        blocks = []
        for name in SECTIONS:
            lines = self.sections.get(name, [])
            if lines:
                blocks.append(f"{TITLES[name]}:\n" + "\n".join(line.render() for line in lines))
        return "\n".join(blocks) if blocks else "(no memories yet)"

    @classmethod
    def empty(cls, orchestrator_id: str, generated_at: str) -> Bulletin:
        return cls(orchestrator_id, generated_at, 0, {name: [] for name in SECTIONS})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Bulletin:
        return cls(
            orchestrator_id=data["orchestratorId"], generated_at=data["generatedAt"],
            watermark=int(data["watermark"]), truncated=bool(data["truncated"]),
            sections={name: [Line(item["text"], tuple(item["memoryIds"]))
                             for item in data["sections"].get(name, [])] for name in SECTIONS})


# ---------------------------------------------------------------------------- compose


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE_CHARS else flat[: MAX_LINE_CHARS - 1] + "…"


def _age_days(item: Item, now: datetime) -> float:
    return max(0.0, (now - parse_ts(item.created_at)).total_seconds() / 86_400)


def said(item: Item, now: datetime) -> str:
    """When ``item`` was said, as a person reads it: "just now", "5 min ago", "yesterday"."""
    seconds = max(0.0, (now - parse_ts(item.created_at)).total_seconds())
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86_400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86_400)
    if days == 1:
        return "yesterday"
    return f"{days} days ago" if days < 30 else f"on {item.created_at[:10]}"


def _by_importance(items: Sequence[Item], now: datetime) -> list[Item]:
    # Importance first, then fresher, then memoryId: a total, deterministic order.
    return sorted(items, key=lambda i: (-i.importance, _age_days(i, now), i.memory_id))


def _newest(items: Sequence[Item]) -> list[Item]:
    return sorted(items, key=lambda i: (i.created_at, i.memory_id), reverse=True)


def _candidates(facts: Facts, limits: BulletinSettings, now: datetime) -> dict[str, list[Line]]:
    of = {t: [i for i in facts.items if i.type == t] for t in
          ("Identity", "Fact", "Event", "Observation", "Goal", "Todo", "Decision", "Preference")}
    knowledge = (_by_importance(of["Identity"], now) + _by_importance(of["Fact"], now)
                 + _by_importance(of["Event"] + of["Observation"], now))
    # A memory in a conflict is shown once, in the conflicts section, beside its rival.
    conflicted = {m for c in facts.conflicts for m in (c.newer.memory_id, c.older.memory_id)}
    conflicts = [Line(_clip(f"conflicting: {c.newer.summary} (said {said(c.newer, now)}) vs "
                            f"{c.older.summary} (said {said(c.older, now)})"),
                      (c.newer.memory_id, c.older.memory_id))
                 for c in sorted(facts.conflicts,
                                 key=lambda c: (c.newer.created_at, c.newer.memory_id),
                                 reverse=True)]
    uncertain = [i for i in _by_importance(facts.items, now)
                 if i.confidence < limits.low_confidence and i.memory_id not in conflicted]
    conflicts += [Line(_clip(f"uncertain ({i.confidence:.2f}): {i.summary}"), (i.memory_id,))
                  for i in uncertain]

    def lines(items: Sequence[Item]) -> list[Line]:
        return [Line(_clip(i.summary), (i.memory_id,)) for i in items
                if i.memory_id not in conflicted]

    return {
        "knowledge_summary": lines(knowledge),
        "active_goals": lines(_by_importance(of["Goal"], now)),
        "open_todos": lines(_by_importance(of["Todo"], now)),
        "recent_decisions": lines(_newest(of["Decision"])),
        "preference_profile": lines(_by_importance(of["Preference"], now)),
        "conflicts_and_uncertainties": conflicts,
    }


def _size(sections: dict[str, list[Line]]) -> int:
    return len(Bulletin("", "", 0, sections).to_text())


def compose(facts: Facts, limits: BulletinSettings, now: datetime) -> Bulletin:
    """The bulletin for ``facts`` at ``now``, within ``limits`` (pure, deterministic)."""
    truncated = False
    sections: dict[str, list[Line]] = {}
    for name, lines in _candidates(facts, limits, now).items():
        kept: list[Line] = []
        chars = 0
        for line in lines:
            cost = len(line.render()) + 1
            if len(kept) >= limits.max_items_per_section or \
                    chars + cost > limits.max_chars_per_section:
                truncated = True
                break
            kept.append(line)
            chars += cost
        sections[name] = kept
    for name in DROP_ORDER:
        while sections[name] and _size(sections) > limits.max_total_chars:
            sections[name].pop()
            truncated = True
    return Bulletin(orchestrator_id=facts.orchestrator_id, generated_at=format_ts(now),
                    watermark=facts.watermark, sections=sections, truncated=truncated)


def build(odb: OrchestratorDB, now: datetime, view: View = DEFAULT_VIEW) -> Bulletin:
    """The bulletin of ``odb`` at ``now``: its facts read in one snapshot, then composed.

    ``view`` (a session and/or project) picks the memories it may show: global ones by
    default, never restricted ones (storage/visibility.py).
    Raises StorageError / MemoryCorrupt when the database cannot be read.
    """
    limits = odb.memory.bulletin
    with spans.span(names.SPAN_BULLETIN, {names.ORCHESTRATOR: odb.orchestrator_id}) as span:
        facts = bulletin_reads.facts(odb, take=limits.max_items_per_section,
                                     low_confidence=limits.low_confidence, keep=unresolved,
                                     view=replace(view, include_restricted=False))
        bulletin = compose(facts, limits, now)
        if spans.enabled():
            span.update({names.COUNT: sum(map(len, bulletin.sections.values())),
                         names.TRUNCATED: bulletin.truncated,
                         names.CHARS: len(bulletin.to_text())})
        return bulletin
