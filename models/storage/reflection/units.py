"""What reflection reads and writes besides insights: units, topics and crystals (schema 6).

A *unit* is an active, live memory that is not itself a crystal. Writes run inside the
caller's ``odb.write()``; :func:`units` takes its own snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from orchmem.models.core.shapes import EdgeType, Status, format_ts, utc_now
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.reflection.insights import REFLECT_SCHEMA, counts
from orchmem.models.storage.schema.migrations import schema_version
from orchmem.models.storage.schema.tables import (
    CrystalRow,
    InsightRow,
    MemoryEdgeRow,
    MemoryRow,
    MemoryTopicRow,
    ProposalRow,
)


@dataclass(frozen=True)
class StoredUnit:
    """One active memory as reflection sees it."""

    row_id: int
    memory_id: str
    type: str
    content: str
    summary: str
    importance: int
    confidence: float
    subject: str | None
    value: str | None
    stated: bool
    reinforcements: int
    fingerprint: str
    created_at: str
    topic: str | None


_UNIT_COLUMNS = ("m.id, m.memory_id, m.type, m.content, m.summary, m.importance, "
                 "m.confidence, m.subject, m.value, m.stated, m.reinforcements, "
                 "m.fingerprint, m.created_at, t.topic")


def units(odb: OrchestratorDB) -> list[StoredUnit]:
    """Every active live memory that is not a crystal, oldest first (one snapshot).

    Only global memories that are public or internal: a crystal is a global
    memory that repeats its units' words, so a session's, a project's, a confidential or
    a restricted memory must never be one of its units."""
    with odb.read():
        rows = odb.sql(f"SELECT {_UNIT_COLUMNS} FROM memories m LEFT JOIN memory_topics t "
                       "ON t.memory_id = m.memory_id WHERE m.status = ? "
                       "AND m.forgotten = 0 AND m.scope = 'global' "
                       "AND m.sensitivity IN ('public', 'internal') AND m.memory_id NOT IN "
                       "(SELECT memory_id FROM crystals) ORDER BY m.created_at, m.memory_id",
                       (Status.ACTIVE.value,))
    return [StoredUnit(row_id=r[0], memory_id=r[1], type=r[2], content=r[3], summary=r[4],
                       importance=r[5], confidence=r[6], subject=r[7], value=r[8],
                       stated=bool(r[9]), reinforcements=r[10], fingerprint=r[11],
                       created_at=r[12], topic=r[13]) for r in rows]


def set_topics(changes: Mapping[str, str | None]) -> int:
    """Write the topics that changed (inside a write); returns how many rows changed."""
    gone = sorted(m for m, t in changes.items() if t is None)
    if gone:
        MemoryTopicRow.delete().where(MemoryTopicRow.memory.in_(gone)).execute()
    rows = [{"memory": m, "topic": t} for m, t in sorted(changes.items()) if t is not None]
    if rows:
        MemoryTopicRow.insert_many(rows).on_conflict_replace().execute()
    return len(changes)


def topics_of(memory_ids: Sequence[str]) -> dict[str, str]:
    """memoryId -> topic for those of ``memory_ids`` that have one (inside a bound block;
    empty on a file before schema 6)."""
    if not memory_ids or schema_version() < REFLECT_SCHEMA:
        return {}
    rows = MemoryTopicRow.select(MemoryTopicRow.memory, MemoryTopicRow.topic).where(
        MemoryTopicRow.memory.in_(list(memory_ids))).tuples()
    return {str(m): str(t) for m, t in cast(Any, rows)}


def topic_counts(odb: OrchestratorDB) -> list[tuple[str, int, str | None]]:
    """(topic, active units, its crystal's memoryId) for every topic, largest first."""
    return [(str(t), int(n), c) for t, n, c in odb.sql(
        "SELECT t.topic, count(*), c.memory_id FROM memory_topics t "
        "JOIN memories m ON m.memory_id = t.memory_id "
        "LEFT JOIN crystals c ON c.topic = t.topic WHERE m.status = 'active' "
        "AND m.forgotten = 0 AND m.memory_id NOT IN "
        "(SELECT memory_id FROM crystals) GROUP BY t.topic ORDER BY count(*) DESC, t.topic")]


def linked_pairs(memory_ids: Sequence[str]) -> set[tuple[str, str]]:
    """(from, to) of every edge among ``memory_ids``, both directions (inside a bound block)."""
    ids = list(memory_ids)
    if not ids:
        return set()
    rows: list[tuple[str, str]] = list(cast(Any,
        MemoryEdgeRow.select(MemoryEdgeRow.from_memory, MemoryEdgeRow.to_memory).where(
            MemoryEdgeRow.from_memory.in_(ids) & MemoryEdgeRow.to_memory.in_(ids)).tuples()))
    return {p for a, b in rows for p in ((a, b), (b, a))}


# -- crystals -------------------------------------------------------------------------


def crystals() -> dict[str, tuple[str, str]]:
    """topic -> (crystal memoryId, digest of its units), inside a bound block."""
    return {r.topic: (r.memory_id, r.units_digest) for r in CrystalRow.select()}


def crystal_ids(odb: OrchestratorDB) -> set[str]:
    """The memoryIds of every crystal (a reader on a file before schema 6 has none)."""
    with odb.bound():
        if schema_version() < REFLECT_SCHEMA:
            return set()
    return {str(r[0]) for r in odb.sql("SELECT memory_id FROM crystals")}


def save_crystal(topic: str, memory_id: str, digest: str, unit_count: int) -> None:
    CrystalRow.insert(topic=topic, memory_id=memory_id, units_digest=digest, units=unit_count,
                      built_at=format_ts(utc_now())).on_conflict_replace().execute()


def rewrite_crystal(memory_id: str, fields: Mapping[str, Any]) -> None:
    """Replace a crystal memory's text and scores in place (FTS follows by trigger)."""
    (MemoryRow.update(**fields, status=Status.ACTIVE.value, updated_at=format_ts(utc_now()))
     .where(MemoryRow.memory_id == memory_id).execute())


def drop_part_of(crystal_id: str, keep: Sequence[str]) -> int:
    """Delete the PartOf edges into ``crystal_id`` from units not in ``keep``."""
    return int(MemoryEdgeRow.delete().where(
        MemoryEdgeRow.to_memory == crystal_id,
        MemoryEdgeRow.edge_type == EdgeType.PART_OF.value,
        MemoryEdgeRow.from_memory.not_in(list(keep))).execute())


def forget_crystal_row(topic: str) -> None:
    CrystalRow.delete().where(CrystalRow.topic == topic).execute()


def crystal_of(odb: OrchestratorDB, memory_ids: Sequence[str]) -> dict[str, str]:
    """unit -> its crystal, for those of ``memory_ids`` a crystal among them holds."""
    ids = list(memory_ids)
    if not ids or schema_version() < REFLECT_SCHEMA:
        return {}
    marks = ",".join("?" * len(ids))
    return {str(u): str(c) for u, c in odb.sql(
        f"SELECT e.from_memory_id, e.to_memory_id FROM memory_edges e JOIN crystals k "
        f"ON k.memory_id = e.to_memory_id WHERE e.edge_type = 'PartOf' "
        f"AND e.from_memory_id IN ({marks}) AND e.to_memory_id IN ({marks})", ids + ids)}


def reflection_stats(odb: OrchestratorDB) -> dict[str, Any]:
    """``orchmem stats``' reflection counts (inside a read; empty before schema 6)."""
    if schema_version() < REFLECT_SCHEMA:
        return {}
    meta = dict(odb.sql("SELECT key, value FROM meta WHERE key = 'last_reflect_at'"))
    topics = odb.sql("SELECT count(DISTINCT t.topic) FROM memory_topics t JOIN memories m "
                     "ON m.memory_id = t.memory_id WHERE m.status = 'active' "
                     "AND m.forgotten = 0")[0][0]
    crystal_count = odb.sql("SELECT count(*) FROM crystals c JOIN memories m "
                            "ON m.memory_id = c.memory_id WHERE m.status = 'active'")[0][0]
    return {"reflection": {"topics": int(topics), "crystals": int(crystal_count),
                           **counts(odb), "lastReflectAt": meta.get("last_reflect_at")}}


# -- hard forget ----------------------------------------------------------------------
# Each runs inside a hard forget's write (models/governance/derived.py runs them in turn); on a file
# before schema 6 there is nothing to scrub.


def scrub_topics(memory_id: str) -> int:
    """Delete the topic of ``memory_id`` for every memory in it: a topic is named after
    its memories' words. Returns the rows deleted."""
    if schema_version() < REFLECT_SCHEMA:
        return 0
    row = MemoryTopicRow.get_or_none(MemoryTopicRow.memory == memory_id)
    if row is None:
        return 0
    return int(MemoryTopicRow.delete().where(MemoryTopicRow.topic == row.topic).execute())


def scrub_insights(memory_id: str) -> int:
    """Clear the reason of every insight naming ``memory_id`` (it may quote its words)."""
    if schema_version() < REFLECT_SCHEMA:
        return 0
    return int(InsightRow.update(reason=None)
               .where(InsightRow.memory_ids.contains(f'"{memory_id}"')).execute())


def scrub_proposals(memory_id: str) -> int:
    """Replace the reason and topic of every proposal naming ``memory_id``."""
    if schema_version() < REFLECT_SCHEMA:
        return 0
    return int(ProposalRow.update(reason="(forgotten)", topic=None)
               .where((ProposalRow.newer_id == memory_id) | (ProposalRow.older_id == memory_id))
               .execute())


def drop_quoting_crystals(memory_id: str) -> list[str]:
    """Delete the crystal rows of the crystals ``memory_id`` is a unit of and return
    their memoryIds, which the caller erases too (reflection compiles them again from
    what is left)."""
    if schema_version() < REFLECT_SCHEMA:
        return []
    quoted: list[str] = [r[0] for r in cast(Any, MemoryEdgeRow.select(
        MemoryEdgeRow.to_memory).where(MemoryEdgeRow.from_memory == memory_id,
                                       MemoryEdgeRow.edge_type == EdgeType.PART_OF.value)
        .tuples())]
    for crystal in CrystalRow.select().where(CrystalRow.memory_id.in_(quoted)):
        crystal.delete_instance()
    return quoted
