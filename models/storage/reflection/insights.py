"""Insights and evolves proposals (schema 6): rows, reads and status changes.

An insight's id is its kind and what it refers to (``i-conflict-<edgeId>``,
``i-evolves-<proposalId>``), so opening one twice keeps one row. Every write runs inside
the caller's ``odb.write()``; the reads take their own snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from orchmem.models.core.contradictions import Contradiction
from orchmem.models.core.shapes import EdgeType, Status, format_ts, utc_now
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.contradictions import contradictions
from orchmem.models.storage.schema.migrations import schema_version
from orchmem.models.storage.schema.tables import META_SCHEMA_VERSION, InsightRow, ProposalRow

#: The first schema with insights, proposals, crystals and topics.
REFLECT_SCHEMA = 6
CONFLICT = "conflict"
EVOLVES_PENDING = "evolves_pending"


def ids_json(memory_ids: Sequence[str]) -> str:
    """A list of memoryIds as stored (compact, as SQLite's ``json_array`` writes it)."""
    return json.dumps(list(memory_ids), separators=(",", ":"))


def insight_id(kind: str, ref: str) -> str:
    return f"i-{'conflict' if kind == CONFLICT else 'evolves'}-{ref}"


def open_insight(kind: str, ref: str, memory_ids: Sequence[str], reason: str | None) -> bool:
    """Open the insight of ``kind`` about ``ref`` (kept as it is when it exists); returns
    True when a row was added."""
    now = format_ts(utc_now())
    return bool(InsightRow.insert(
        insight_id=insight_id(kind, ref), kind=kind, status="open",
        memory_ids=ids_json(memory_ids), ref=ref, reason=reason, created_at=now,
        updated_at=now).on_conflict_ignore().as_rowcount().execute())


def dismiss(insight_ids: Iterable[str]) -> int:
    """Dismiss these insights when open; returns how many changed."""
    ids = list(insight_ids)
    if not ids:
        return 0
    return int(InsightRow.update(status="dismissed", updated_at=format_ts(utc_now()))
               .where(InsightRow.insight_id.in_(ids), InsightRow.status == "open").execute())


def open_conflicts_between(memory_ids: Sequence[str]) -> list[str]:
    """Open conflict insights whose memories are all among ``memory_ids``."""
    wanted = set(memory_ids)
    rows = InsightRow.select(InsightRow.insight_id, InsightRow.memory_ids).where(
        InsightRow.kind == CONFLICT, InsightRow.status == "open")
    return [r.insight_id for r in rows if set(json.loads(r.memory_ids)) <= wanted]


def conflicts(odb: OrchestratorDB) -> list[Contradiction]:
    """The open conflict insights as :class:`Contradiction` values, newest newer end first
    (one statement: run it inside the caller's ``odb.read()``). On a file a writer has not
    migrated to schema 6 yet (readers never migrate), the Contradicts edges themselves."""
    with odb.bound():
        if schema_version() < REFLECT_SCHEMA:
            return contradictions(odb)
    rows = odb.sql(
        "SELECT i.ref, f.memory_id, t.memory_id, f.status, t.status FROM insights i "
        "CROSS JOIN memories f ON f.memory_id = json_extract(i.memory_ids, '$[0]') "
        "CROSS JOIN memories t ON t.memory_id = json_extract(i.memory_ids, '$[1]') "
        "WHERE i.kind = ? AND i.status = 'open' ORDER BY f.created_at DESC, i.ref",
        (CONFLICT,))
    return [Contradiction(edge_id=r[0], newer_id=r[1], older_id=r[2],
                          newer_status=Status(r[3]), older_status=Status(r[4])) for r in rows]


def sync_conflicts(odb: OrchestratorDB) -> tuple[int, int]:
    """Inside a write: open an insight for every unresolved Contradicts edge that has none,
    dismiss those whose contradiction was resolved. Returns (opened, dismissed)."""
    rows = odb.sql(
        "SELECT e.edge_id, e.from_memory_id, e.to_memory_id, e.reason, "
        "f.status = 'active' AND t.status = 'active', i.status FROM memory_edges e "
        "JOIN memories f ON f.memory_id = e.from_memory_id "
        "JOIN memories t ON t.memory_id = e.to_memory_id "
        "LEFT JOIN insights i ON i.insight_id = 'i-conflict-' || e.edge_id "
        "WHERE e.edge_type = ?", (EdgeType.CONTRADICTS.value,))
    opened = sum(open_insight(CONFLICT, r[0], (r[1], r[2]), r[3]) for r in rows
                 if r[4] and r[5] is None)
    closed = dismiss(insight_id(CONFLICT, r[0]) for r in rows if not r[4] and r[5] == "open")
    return opened, closed


def open_insights(odb: OrchestratorDB, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` open insights as JSON (one statement); none on a file a writer
    has not migrated to schema 6 yet (readers never migrate)."""
    # The version read with one raw statement: recall asks on every question, and
    # binding the table classes for it costs more than the read.
    version = odb.sql("SELECT value FROM meta WHERE key = ?", (META_SCHEMA_VERSION,))
    if (int(version[0][0]) if version else 0) < REFLECT_SCHEMA:
        return []
    rows = odb.sql("SELECT insight_id, kind, memory_ids, ref, reason, created_at FROM insights "
                   "WHERE status = 'open' ORDER BY created_at DESC, insight_id LIMIT ?",
                   (limit,))
    return [{"insightId": r[0], "kind": r[1], "memoryIds": json.loads(r[2]), "ref": r[3],
             "reason": r[4], "createdAt": r[5]} for r in rows]


# -- proposals ------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredProposal:
    proposal_id: str
    relation: str
    newer_id: str
    older_id: str
    topic: str | None
    reason: str
    confidence: float
    fingerprint: str
    status: str
    decided_by: str | None
    decided_reason: str | None
    created_at: str
    decided_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"proposalId": self.proposal_id, "relation": self.relation,
                "newerId": self.newer_id, "olderId": self.older_id, "topic": self.topic,
                "reason": self.reason, "confidence": self.confidence, "status": self.status,
                "decidedBy": self.decided_by, "decidedReason": self.decided_reason,
                "createdAt": self.created_at, "decidedAt": self.decided_at}


_PROPOSAL_COLUMNS = ("proposal_id, relation, newer_id, older_id, topic, reason, confidence, "
                     "fingerprint, status, decided_by, decided_reason, created_at, decided_at")


def add_proposal(proposal: StoredProposal) -> bool:
    """Insert a pending proposal and its evolves_pending insight; False (and nothing
    written) when a proposal with its fingerprint exists, whatever its status."""
    fields = {name: getattr(proposal, name) for name in _PROPOSAL_COLUMNS.split(", ")}
    inserted = ProposalRow.insert(**fields).on_conflict_ignore().as_rowcount().execute()
    if inserted:
        open_insight(EVOLVES_PENDING, proposal.proposal_id,
                     (proposal.newer_id, proposal.older_id),
                     f"{proposal.relation}: {proposal.reason}")
    return bool(inserted)


def fingerprints() -> set[str]:
    """Every proposal fingerprint ever stored (inside a bound block)."""
    return {r.fingerprint for r in ProposalRow.select(ProposalRow.fingerprint)}


def get_proposal(proposal_id: str) -> StoredProposal | None:
    """Inside a bound block."""
    row = ProposalRow.get_or_none(ProposalRow.proposal_id == proposal_id)
    if row is None:
        return None
    return StoredProposal(*(getattr(row, name) for name in _PROPOSAL_COLUMNS.split(", ")))


def list_proposals(odb: OrchestratorDB, status: str | None = "pending",
                   limit: int = 100) -> list[StoredProposal]:
    """Proposals newest first (``status`` None: any)."""
    where, params = ("WHERE status = ? ", [status]) if status else ("", [])
    with odb.read():
        rows = odb.sql(f"SELECT {_PROPOSAL_COLUMNS} FROM proposals {where}"
                       "ORDER BY created_at DESC, proposal_id LIMIT ?", [*params, limit])
    return [StoredProposal(*r) for r in rows]


def decide(proposal_id: str, status: str, by: str, reason: str | None) -> None:
    """Record a review decision and dismiss the proposal's insight (inside a write)."""
    (ProposalRow.update(status=status, decided_by=by, decided_reason=reason,
                        decided_at=format_ts(utc_now()))
     .where(ProposalRow.proposal_id == proposal_id).execute())
    dismiss([insight_id(EVOLVES_PENDING, proposal_id)])


def counts(odb: OrchestratorDB) -> dict[str, dict[str, int]]:
    """Insights by kind and status, proposals by status (one snapshot per statement)."""
    insights: dict[str, int] = {}
    for kind, status, n in odb.sql("SELECT kind, status, count(*) FROM insights "
                                   "GROUP BY kind, status"):
        insights[f"{kind}:{status}"] = int(n)
    proposals = {str(s): int(n) for s, n in odb.sql(
        "SELECT status, count(*) FROM proposals GROUP BY status")}
    return {"insights": insights, "proposals": proposals}
