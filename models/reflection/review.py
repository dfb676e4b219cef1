"""Review of evolves proposals: accept or reject one, as an audited write with its receipt.

Accepting ``replaces`` or ``challenges`` supersedes the older memory: status
``superseded``, an ``Updates`` edge newer -> older, a ``supersede`` audit event and a
``review_accept`` one; the proposal's insight and any open conflict between the two are
dismissed. Accepting ``refines`` keeps both active and links them (``RelatedTo``,
reason "refines"). Rejecting keeps the proposal's row (status ``rejected``, with the
reason), so reflection never proposes the pair again. Either way the audit watermark
moves, which marks the working-memory projection dirty (models/bulletin/working.py).

Refused with a clear error and no change (MemoryValidationError unless said):
a proposal id of another orchestrator (ScopeViolation), an unknown one
(MemoryNotFound), a proposal that was already accepted or rejected (accepting twice,
rejecting an accepted one), and accepting a proposal whose memories are no longer
both active (forgotten, retracted or superseded meanwhile).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from orchmem.config import MemoryNotFound, MemoryValidationError, ScopeViolation
from orchmem.models.core.payloads import IdempotencyKey
from orchmem.models.core.shapes import EdgeInput, EdgeType, Status, WireModel, orchestrator_tag
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery import receipts
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.memories.edges import insert_edge
from orchmem.models.storage.memories.events import add_event
from orchmem.models.storage.reflection import insights
from orchmem.models.storage.reflection.insights import StoredProposal

_PROPOSAL_ID = re.compile(r"p-[0-9a-f]{8}-[0-9a-f]{16}")
Reason = Annotated[str, Field(strict=True, min_length=1, max_length=500)]


class Review(WireModel):
    """``{"op": "accept" | "reject", "proposalId", "reason"?}``."""

    op: Literal["accept", "reject"]
    proposal_id: Annotated[str, Field(strict=True, pattern=r"^p-[0-9a-f]{8}-[0-9a-f]{16}$")]
    reason: Reason | None = None
    actor: Literal["user", "system"] = "user"
    idempotency_key: IdempotencyKey | None = None


REVIEW_ADAPTER: TypeAdapter[Review] = TypeAdapter(Review)


def _refuse(message: str) -> MemoryValidationError:
    return MemoryValidationError(message, [{"path": "proposalId", "message": message}])


def check_proposal_id(value: str, orchestrator_id: str) -> str:
    """``value`` if it is a proposalId of ``orchestrator_id``; else MemoryValidationError
    (malformed) or ScopeViolation (another orchestrator's)."""
    if _PROPOSAL_ID.fullmatch(value) is None:
        raise _refuse(f"proposalId: {value[:60]!r} is not a proposalId (p-xxxxxxxx-x…)")
    if value[2:10] != orchestrator_tag(orchestrator_id):
        raise ScopeViolation(f"proposalId {value} belongs to another orchestrator, "
                             f"not {orchestrator_id!r}")
    return value


def _pending(odb: OrchestratorDB, proposal_id: str, op: str) -> StoredProposal:
    check_proposal_id(proposal_id, odb.orchestrator_id)
    proposal = insights.get_proposal(proposal_id)
    if proposal is None:
        raise MemoryNotFound(f"no proposal {proposal_id} for {odb.orchestrator_id!r}")
    if proposal.status != "pending":
        raise _refuse(f"cannot {op} proposal {proposal_id}: it was already {proposal.status}"
                      + (f" by {proposal.decided_by}" if proposal.decided_by else ""))
    return proposal


def accept_in_transaction(odb: OrchestratorDB, proposal_id: str, *, actor: str,
                          key: str | None, reason: str | None = None) -> dict[str, Any]:
    """Apply a pending proposal (inside ``odb.write()``); returns what changed."""
    proposal = _pending(odb, proposal_id, "accept")
    ends = [memories.get(proposal.newer_id), memories.get(proposal.older_id)]
    for end, name in zip(ends, (proposal.newer_id, proposal.older_id), strict=True):
        if end is None or end.forgotten or end.status != Status.ACTIVE.value:
            state = "forgotten" if end is None or end.forgotten else end.status
            raise _refuse(f"cannot accept proposal {proposal_id}: memory {name} is {state} "
                          "since it was proposed")
    newer, older = ends
    assert newer is not None and older is not None
    superseded: list[str] = []
    if proposal.relation in ("replaces", "challenges"):
        memories.set_status(older, Status.SUPERSEDED, reason=f"review: {proposal.reason}",
                            actor=actor, key=key, by=newer.memory_id)
        edge_type = EdgeType.UPDATES
        superseded.append(older.memory_id)
    else:
        edge_type = EdgeType.RELATED_TO
    edge_id = insert_edge(odb, EdgeInput(from_memory_id=newer.memory_id,
                                         to_memory_id=older.memory_id, edge_type=edge_type,
                                         reason=proposal.relation),
                          from_id=newer.memory_id, to_id=older.memory_id, key=key, actor=actor)
    insights.decide(proposal_id, "accepted", actor, reason)
    dismissed = insights.dismiss(insights.open_conflicts_between(
        [newer.memory_id, older.memory_id]))
    add_event("review_accept", [newer.memory_id, older.memory_id],
              after={"proposalId": proposal_id, "relation": proposal.relation},
              reason=reason, actor=actor, key=key)
    return {"proposalId": proposal_id, "relation": proposal.relation, "status": "accepted",
            "superseded": superseded, "edgeIds": [edge_id], "insightsDismissed": dismissed + 1}


def reject_in_transaction(odb: OrchestratorDB, proposal_id: str, *, actor: str,
                          key: str | None, reason: str | None = None) -> dict[str, Any]:
    proposal = _pending(odb, proposal_id, "reject")
    insights.decide(proposal_id, "rejected", actor, reason)
    add_event("review_reject", [proposal.newer_id, proposal.older_id],
              after={"proposalId": proposal_id, "relation": proposal.relation},
              reason=reason, actor=actor, key=key)
    return {"proposalId": proposal_id, "relation": proposal.relation, "status": "rejected",
            "superseded": [], "edgeIds": [], "insightsDismissed": 1}


def apply_review(odb: OrchestratorDB, review: Review, *, key: str,
                 task: str) -> dict[str, Any]:
    """Accept or reject with the receipt for ``key``, in one transaction; returns the task
    result (``duplicate`` True for a key applied before). Raises as the module says."""
    with odb.write():
        stored = receipts.final_result_in_transaction(key)
        if stored is not None:
            return {**stored, "duplicate": True}
        step = accept_in_transaction if review.op == "accept" else reject_in_transaction
        result = {"ok": True, "task": task, "op": review.op,
                  "orchestratorId": odb.orchestrator_id, "idempotencyKey": key,
                  **step(odb, review.proposal_id, actor=review.actor, key=key,
                         reason=review.reason)}
        receipts.finish(key, receipts.DONE, result)
    return {**result, "duplicate": False}
