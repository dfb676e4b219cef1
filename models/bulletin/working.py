"""The working-memory projection: ``memory/bulletins/working.md``, "what matters now".

A fixed template, every line citing its memoryIds::

    # Working memory of <orchestratorId>
    _events up to <watermark>, written <time>_

    ## Active goals
    - Ship the billing migration [m-…]
    ## Open todos
    ## Recent decisions
    ## Preferences
    ## Open insights
    - conflict: I live in Lisbon vs I live in Porto [m-…, m-…]

Sections hold the bulletin's best items of each kind (``memory.bulletin``'s
``max_items_per_section``; as there, a unit is left out when its crystal is shown) and
the newest open insights; the whole file stays within
``memory.reflect.working_max_chars`` (lines dropped from the end of the least urgent
section first: insights, preferences, decisions, todos, goals).

The projection is derived data: it is rebuilt from the database whenever it is
*dirty* (the audit watermark moved since it was written, so any change to memory,
including a review decision, dirties it), when it is missing (delete it and the next
refresh recreates it) and at least once a day; a hard forget rebuilds it at once
(models/governance/derived.py). It is written to a temp file and
renamed over the old one, under an advisory ``flock`` on ``working.md.lock`` so two
writers never interleave. Restricted memories must never appear here: every item
passes the default view (storage/visibility.py: global, never restricted).
"""

from __future__ import annotations

import fcntl
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from orchmem.models.core.shapes import format_ts, parse_ts
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.events import ops_since
from orchmem.models.storage.reflection import insights
from orchmem.models.storage.search import bulletin_reads
from orchmem.models.storage.visibility import DEFAULT_VIEW
from orchmem.models.workspace.atomic import write_atomically
from orchmem.models.workspace.private import open_private, private_dir

FILE_NAME = "working.md"
SECTIONS = ("Active goals", "Open todos", "Recent decisions", "Preferences", "Open insights")
_TYPES = {"Active goals": "Goal", "Open todos": "Todo", "Recent decisions": "Decision",
          "Preferences": "Preference"}
DROP_ORDER = ("Open insights", "Preferences", "Recent decisions", "Open todos", "Active goals")
#: Rebuilt at least this often even when nothing changed.
MAX_AGE = timedelta(days=1)
_HEADER = re.compile(r"^_events up to (\d+), written (\S+)_$", re.M)


@dataclass(frozen=True)
class Projection:
    orchestrator_id: str
    watermark: int
    written_at: str
    sections: dict[str, list[str]]

    def to_text(self) -> str:
        parts = [f"# Working memory of {self.orchestrator_id}",
                 f"_events up to {self.watermark}, written {self.written_at}_", ""]
        for name in SECTIONS:
            parts.append(f"## {name}")
            parts.extend(self.sections.get(name) or ["- (none)"])
        return "\n".join(parts) + "\n"


def _line(text: str, ids: list[str]) -> str:
    flat = " ".join(text.split())
    return f"- {flat[:200]} [{', '.join(ids)}]"


def compose(odb: OrchestratorDB, now: datetime) -> Projection:
    """The projection of ``odb`` at ``now``, read from the database (bounded in size)."""
    limits = odb.memory.bulletin
    # The default view (storage/visibility.py): global memories, never restricted ones,
    # and only insights whose memories it all sees (a reason may quote their words).
    facts = bulletin_reads.facts(odb, take=limits.max_items_per_section,
                                 low_confidence=limits.low_confidence, keep=lambda c: True,
                                 view=DEFAULT_VIEW)
    with odb.read():
        found = insights.open_insights(odb, limits.max_items_per_section)
        seen = bulletin_reads.visible(odb, DEFAULT_VIEW, {m for x in found
                                                          for m in x["memoryIds"]})
    found = [x for x in found if set(x["memoryIds"]) <= seen]
    summaries = {i.memory_id: i.summary for i in facts.items}
    sections: dict[str, list[str]] = {}
    for name, memory_type in _TYPES.items():
        items = [i for i in facts.items if i.type == memory_type]
        order = (lambda i: (i.created_at, i.memory_id)) if memory_type == "Decision" else \
            (lambda i: (i.importance, i.created_at, i.memory_id))
        items.sort(key=order, reverse=True)
        sections[name] = [_line(i.summary, [i.memory_id]) for i in items]
    sections["Open insights"] = [
        _line(f"{x['kind'].replace('_', ' ')}: " + " vs ".join(
            summaries.get(m, m) for m in x["memoryIds"]) + (
            f" ({x['reason']})" if x["reason"] else ""), x["memoryIds"]) for x in found]
    projection = Projection(odb.orchestrator_id, facts.watermark, format_ts(now), sections)
    return _bounded(projection, odb.memory.reflect.working_max_chars)


def _bounded(projection: Projection, max_chars: int) -> Projection:
    for name in DROP_ORDER:
        while projection.sections[name] and len(projection.to_text()) > max_chars:
            projection.sections[name].pop()
    return projection


def path_of(odb: OrchestratorDB) -> Path:
    return odb.workspace.bulletins_dir / FILE_NAME


def written(path: Path) -> tuple[int, datetime] | None:
    """(watermark, time) from a projection file's header; None when missing or damaged."""
    try:
        match = _HEADER.search(path.read_text(encoding="utf-8")[:1000])
        return (int(match.group(1)), parse_ts(match.group(2))) if match else None
    except (OSError, ValueError):
        return None


def dirty(odb: OrchestratorDB, watermark: int, now: datetime) -> bool:
    """True when working.md is missing, damaged, behind ``watermark`` or a day old."""
    seen = written(path_of(odb))
    return seen is None or seen[0] != watermark or now - seen[1] >= MAX_AGE


#: Audit ops after which working.md is stale for an injection at once: a decision that
#: supersedes (an accepted proposal), a forget (soft or hard), an invalidation.
STALE_AT_ONCE = ("review_accept", "supersede", "retract", "forget_hard", "invalidate")


def stale_reason(odb: OrchestratorDB, now: datetime, new_memories: int) -> str | None:
    """Why an injection must rebuild working.md before using it, or None when the file
    is fresh enough: missing or damaged, a day old, an op of :data:`STALE_AT_ONCE`
    since it was written, or at least ``new_memories`` memories created since."""
    seen = written(path_of(odb))
    if seen is None:
        return "working.md is missing"
    if now - seen[1] >= MAX_AGE:
        return "working.md is a day old"
    ops = ops_since(odb, seen[0])
    changed = sorted(op for op in STALE_AT_ONCE if ops.get(op))
    if changed:
        return f"memory changed since working.md was written ({', '.join(changed)})"
    created = ops.get("create", 0)
    if created >= new_memories:
        return (f"{created} memories were created since working.md was written "
                f"(memory.context.working_refresh_after = {new_memories})")
    return None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open_private(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def refresh(odb: OrchestratorDB, now: datetime, *, force: bool = False) -> dict[str, Any]:
    """Rebuild working.md when dirty (or ``force``), atomically under its lock. Returns
    ``{"written": bool, "chars", "watermark"}``."""
    path = path_of(odb)
    private_dir(path.parent)
    with _locked(path):
        projection = compose(odb, now)
        if not force and not dirty(odb, projection.watermark, now):
            return {"written": False, "watermark": projection.watermark,
                    "chars": path.stat().st_size}
        text = projection.to_text()
        write_atomically(path, text)
    return {"written": True, "watermark": projection.watermark, "chars": len(text)}


def read(odb_workspace_bulletins: Path) -> str | None:
    """The projection's text for a prompt (None when there is none yet)."""
    try:
        return (odb_workspace_bulletins / FILE_NAME).read_text(encoding="utf-8")
    except OSError:
        return None
