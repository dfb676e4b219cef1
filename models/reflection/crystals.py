"""Crystals: one consolidated memory per topic, compiled from the topic's units.

A topic with at least ``memory.reflect.crystal_min_units`` *settled* units gets a
crystal: a memory (captured by the system, tier "semantic" once tiers exist) whose
content is extracted from its highest-signal units, linked to each unit by a ``PartOf``
edge unit -> crystal. A unit is settled when its confidence is at least
``memory.bulletin.low_confidence`` or it was reinforced: a low-confidence candidate
stays episodic (counted in no crystal) until something restates it.

Signal = importance/100 x confidence x (1 + reinforcements) (ties: newer first, then
memoryId). The summary quotes the best ``crystal_summary_units`` units oldest first,
joined by "; ", under the topic's name; the crystal's confidence is their mean, its
importance their maximum, its type the most common type of the topic (ties: the type
of the best unit).

A topic has at most one crystal (``crystals`` row, keyed by topic): when the digest of
its units (ids and fingerprints) changes, the same crystal is rewritten in place and
its PartOf edges follow; below the threshold it is retracted. An optional summariser
``(topic, contents) -> text`` (an LLM, say) replaces the extractive summary.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchmem.config import ConfigError
from orchmem.models.core.registry import resolve
from orchmem.models.storage.reflection.units import StoredUnit

Summariser = Callable[[str, Sequence[str]], str]
#: Longest crystal content (the schema's bound is larger; a crystal stays a digest).
MAX_CRYSTAL_CHARS = 1200


@dataclass(frozen=True)
class Compiled:
    """What a topic's crystal should hold."""

    topic: str
    type: str
    content: str
    importance: int
    confidence: float
    unit_ids: tuple[str, ...]
    digest: str


def settled(unit: StoredUnit, low_confidence: float) -> bool:
    return unit.confidence >= low_confidence or unit.reinforcements > 0


def signal(unit: StoredUnit) -> float:
    return unit.importance / 100 * unit.confidence * (1 + unit.reinforcements)


def digest(units: Sequence[StoredUnit]) -> str:
    text = "\n".join(f"{u.memory_id} {u.fingerprint}" for u in sorted(
        units, key=lambda u: u.memory_id))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def extractive(topic: str, contents: Sequence[str]) -> str:
    """The default summary: the topic's name, then its best units' words."""
    name = topic.split(":", 1)[-1].split("#", 1)[0].replace("-", " ")
    body = "; ".join(" ".join(c.split()).rstrip(".") for c in contents)
    text = f"{name}: {body}"
    return text if len(text) <= MAX_CRYSTAL_CHARS else text[: MAX_CRYSTAL_CHARS - 1] + "…"


def compile_topic(topic: str, units: Sequence[StoredUnit], *, min_units: int,
                  summary_units: int, low_confidence: float,
                  summariser: Summariser = extractive) -> Compiled | None:
    """The crystal ``units`` of ``topic`` compile into, or None below ``min_units``."""
    kept = [u for u in units if settled(u, low_confidence)]
    if len(kept) < min_units:
        return None
    best = sorted(kept, key=lambda u: (-signal(u), _newest_first(u), u.memory_id))
    quoted = sorted(best[:summary_units], key=lambda u: (u.created_at, u.memory_id))
    types = Counter(u.type for u in kept)
    top = max(types.values())
    kind = next(u.type for u in best if types[u.type] == top)
    content = summariser(topic, [u.content for u in quoted])
    return Compiled(
        topic=topic, type=kind, content=content[:MAX_CRYSTAL_CHARS],
        importance=max(u.importance for u in quoted),
        confidence=round(sum(u.confidence for u in quoted) / len(quoted), 6),
        unit_ids=tuple(sorted(u.memory_id for u in kept)), digest=digest(kept))


def _newest_first(unit: StoredUnit) -> str:
    # created_at is ISO 8601: inverting each character's order sorts newest first.
    return "".join(chr(0x10FFFF - ord(c)) for c in unit.created_at)


def by_topic(units: Sequence[StoredUnit]) -> dict[str, list[StoredUnit]]:
    """Units grouped by topic (units without one left out), topics in name order."""
    grouped: dict[str, list[StoredUnit]] = defaultdict(list)
    for unit in units:
        if unit.topic:
            grouped[unit.topic].append(unit)
    return dict(sorted(grouped.items()))


def load_summariser(spec: str) -> Summariser:
    """The summariser ``memory.reflect.summariser`` names. Raises ConfigError."""
    return resolve(spec, {"extractive": extractive}, setting="memory.reflect.summariser",
                   error=ConfigError)
