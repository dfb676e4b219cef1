"""The bulletin's read: the few memories each section can show, the standing
conflicts and the event watermark, all in one snapshot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchmem.models.bulletin.facts import Conflict, Facts, Item
from orchmem.models.core.contradictions import Contradiction
from orchmem.models.core.shapes import Status
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.reflection.insights import conflicts as open_conflicts
from orchmem.models.storage.reflection.units import crystal_of
from orchmem.models.storage.schema.tables import META_EVENT_WATERMARK, live
from orchmem.models.storage.search.reads import passing
from orchmem.models.storage.visibility import ALL_STATUSES, View

_COLUMNS = "memory_id, type, summary, importance, confidence, created_at"
_ACTIVE = f"status = '{Status.ACTIVE.value}' AND {live()}"
#: Each type's best few, in the order ``bulletin.compose`` ranks them.
_ORDERS = (("Identity", "importance DESC, created_at DESC"),
           ("Fact", "importance DESC, created_at DESC"),
           ("Goal", "importance DESC, created_at DESC"),
           ("Todo", "importance DESC, created_at DESC"),
           ("Preference", "importance DESC, created_at DESC"),
           ("Decision", "created_at DESC"),
           ("Event", "created_at DESC"),
           ("Observation", "created_at DESC"))


def facts(odb: OrchestratorDB, *, take: int, low_confidence: float,
          keep: Callable[[Contradiction], bool], view: View) -> Facts:
    """The bulletin's :class:`Facts`, read in one snapshot.

    Only the best ``take`` active memories of each type are read, and the best ``take``
    of those under ``low_confidence``, so the cost does not grow with the size of the
    memory. Conflicts are the newest ``take`` open conflict insights
    (models/storage/reflection/insights.py) that ``keep`` accepts. Only memories ``view``
    sees are read (both ends of a conflict).
    Raises StorageError / MemoryCorrupt when the file cannot be read.
    """
    seen, seen_params = view.sql()
    with odb.read():
        rows: dict[str, tuple[Any, ...]] = {}
        for memory_type, order in _ORDERS:
            for row in odb.sql(f"SELECT {_COLUMNS} FROM memories WHERE {_ACTIVE} AND type = ? "
                               f"AND {seen} ORDER BY {order}, memory_id LIMIT ?",
                               (memory_type, *seen_params, take)):
                rows[row[0]] = row
        for row in odb.sql(f"SELECT {_COLUMNS} FROM memories WHERE {_ACTIVE} "
                           f"AND confidence < ? AND {seen} ORDER BY importance DESC, "
                           "created_at DESC, memory_id LIMIT ?",
                           (low_confidence, *seen_params, take)):
            rows[row[0]] = row
        # A unit whose crystal is shown is said by the crystal already (reflection.py).
        for unit in crystal_of(odb, list(rows)):
            rows.pop(unit, None)
        candidates = [c for c in open_conflicts(odb) if keep(c)]
        seen_ids = visible(odb, view, {m for c in candidates for m in (c.newer_id, c.older_id)})
        standing = [c for c in candidates if c.newer_id in seen_ids and c.older_id in seen_ids
                    ][:take]
        conflicts = _conflicts(odb, standing)
        watermark = odb.sql("SELECT value FROM meta WHERE key = ?", (META_EVENT_WATERMARK,))
    return Facts(orchestrator_id=odb.orchestrator_id,
                 items=tuple(Item(*r) for r in sorted(rows.values())),
                 conflicts=conflicts, watermark=int(watermark[0][0]) if watermark else 0)


def _conflicts(odb: OrchestratorDB, standing: list[Contradiction]) -> tuple[Conflict, ...]:
    ends = sorted({m for c in standing for m in (c.newer_id, c.older_id)})
    if not ends:
        return ()
    items = {r[0]: Item(*r) for r in odb.sql(
        f"SELECT {_COLUMNS} FROM memories WHERE memory_id IN ({','.join('?' * len(ends))})",
        ends)}
    return tuple(Conflict(items[c.newer_id], items[c.older_id]) for c in standing)


def visible(odb: OrchestratorDB, view: View, ids: set[str]) -> set[str]:
    """Those of ``ids`` that ``view`` sees, forgotten ones never (inside ``odb.read()``)."""
    return passing(odb, sorted(ids), ALL_STATUSES, None, view)
