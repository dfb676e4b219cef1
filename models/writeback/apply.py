"""The write-back operation: proposed memories and edges in, one transaction, ids out.

The receipt that makes a write idempotent commits in the same transaction as the
data: a redelivered task finds it and writes nothing, unless a memory it wrote was
retracted since (a soft forget, a retract): the same write delivered again is then new
evidence and makes that memory active again (a ``restate`` event). Memory ids are derived from
the idempotency key and the candidate's position, so even a replay whose receipt
was garbage-collected lands on the same ids instead of creating copies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from orchmem.config import MemoryValidationError
from orchmem.models.core.shapes import EdgeInput, MemoryInput, derive_id, format_ts, utc_now
from orchmem.models.execlog import tape
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery import receipts
from orchmem.models.storage.memories import rows as stored_memories
from orchmem.models.storage.memories.edges import insert_edge
from orchmem.models.storage.search import ann
from orchmem.models.storage.search.vectors import VectorIndex, index_for, store_embeddings
from orchmem.models.writeback.reconcile import Proposed, Reconciler
from orchmem.models.writeback.secrets import classify


def write_memories(
    odb: OrchestratorDB,
    *,
    key: str,
    task: str,
    memories: Sequence[MemoryInput | Proposed],
    edges: Sequence[EdgeInput] = (),
    vectors: Sequence[np.ndarray | None] | None = None,
    embedder: str | None = None,
    extra_result: dict[str, Any] | None = None,
    also: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Reconcile and store ``memories`` and ``edges`` with the receipt for ``key``.

    ``memories`` are explicit MemoryInputs (``vectors`` beside them, optional) or
    Proposed items from an extractor. Returns the task result, also stored in the
    receipt: ``memoryIds`` (in input order), ``created``, ``reinforced``, ``unchanged``
    (memories that already held the statement from the same place), ``restated``
    (retracted memories said again, active once more), ``superseded``,
    ``contradicted``, ``edgeIds``, ``embedded``, ``duplicate``.
    Raises MemoryValidationError for an edge naming an unknown key, MemoryNotFound or
    ScopeViolation for an edge to a memory this orchestrator does not have; then
    nothing of the request is written. ``also(result)`` runs inside the transaction,
    before it commits (ingest records its manifest row there); then each memory created
    from a run's step gets its snapshot on the execution log (models/execlog/tape.py).
    """
    proposals = [m if isinstance(m, Proposed) else Proposed.explicit(
        m, vectors[i] if vectors is not None else None) for i, m in enumerate(memories)]
    proposals = [replace(p, memory=classify(p.memory, odb.memory.governance))
                 for p in proposals]  # the secret detector
    dim = next((int(p.vector.shape[0]) for p in proposals if p.vector is not None), 0)
    # The index is refreshed before the transaction and only read inside it: a rolled
    # back write must never leave its vectors in a cache.
    index = index_for(odb, embedder, dim) if embedder and dim else None
    with odb.write():
        stored = receipts.final_result_in_transaction(key)
        if stored is not None and not stored_memories.retracted_of(stored.get("memoryIds") or []):
            return {**stored, "duplicate": True}
        tally = _reconcile(odb, key, proposals, index)
        embedded = store_embeddings(tally.new_vectors, embedder) \
            if tally.new_vectors and embedder else 0
        edge_ids = [insert_edge(odb, edge, key=key, actor="system",
                                from_id=_resolve_end(edge.from_memory_id, tally.local,
                                                     f"edges.{position}.fromMemoryId"),
                                to_id=_resolve_end(edge.to_memory_id, tally.local,
                                                   f"edges.{position}.toMemoryId"))
                    for position, edge in enumerate(edges)]
        result = {"ok": True, "task": task, "orchestratorId": odb.orchestrator_id,
                  "idempotencyKey": key, "memoryIds": tally.ids, "created": tally.created,
                  "reinforced": tally.reinforced, "restated": tally.restated,
                  "unchanged": tally.unchanged,
                  "superseded": tally.superseded, "contradicted": tally.contradicted,
                  "edgeIds": edge_ids, "embedded": embedded, **(extra_result or {})}
        if also is not None:
            also(result)
        _log_snapshots(odb, key, proposals, tally)
        receipts.finish(key, receipts.DONE, result)
    if embedded and index is not None:
        ann.after_write(odb, index.embedder, index.dim, len(index) + embedded)
    return {**result, "duplicate": False}


@dataclass
class _Tally:
    """What the proposals of one write did, in input order."""

    ids: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    reinforced: list[str] = field(default_factory=list)
    #: retracted memories said again: active once more
    restated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    contradicted: list[list[str]] = field(default_factory=list)
    #: request-local ``key`` of a memory -> its memoryId, for the request's edges.
    local: dict[str, str] = field(default_factory=dict)
    new_vectors: list[tuple[str, np.ndarray]] = field(default_factory=list)


def _reconcile(odb: OrchestratorDB, key: str, proposals: list[Proposed],
               index: VectorIndex | None) -> _Tally:
    reconciler = Reconciler(key, odb.memory.writeback, index)
    reconciler.prepare(proposals)
    tally = _Tally()
    for position, proposed in enumerate(proposals):
        memory_id = derive_id("m", odb.orchestrator_id, key, position)
        earlier = stored_memories.get(memory_id)
        if earlier is not None:
            # the same key again: its receipt is gone, or its memory was retracted since
            # (then this delivery says it again: active, a restatement)
            if earlier.status == "retracted" and not earlier.forgotten:
                stored_memories.restate(earlier, actor=proposed.memory.source.captured_by.value,
                                        key=key)
                tally.restated.append(memory_id)
            tally.ids.append(memory_id)
            if proposed.memory.key:
                tally.local[proposed.memory.key] = memory_id
            continue
        outcome = reconciler.apply(odb, memory_id, proposed, position)
        tally.ids.append(outcome.memory_id)
        if outcome.action == "created":
            tally.created.append(outcome.memory_id)
            if proposed.vector is not None:
                tally.new_vectors.append((outcome.memory_id, proposed.vector))
        elif outcome.action == "reinforced":
            tally.reinforced.append(outcome.memory_id)
        elif outcome.action == "restated":
            tally.restated.append(outcome.memory_id)
        else:
            tally.unchanged.append(outcome.memory_id)
        tally.superseded += outcome.superseded
        tally.contradicted += [list(pair) for pair in outcome.contradicted]
        if proposed.memory.key:
            tally.local[proposed.memory.key] = outcome.memory_id
    return tally


def _log_snapshots(odb: OrchestratorDB, key: str, proposals: list[Proposed],
                   tally: _Tally) -> None:
    """A snapshot on the execution log of each memory created from a run's step, after
    its edges and its step's events (models/execlog/tape.py)."""
    created = set(tally.created)
    if created:
        tape.log_created(odb, key, [(memory_id, p.memory.source) for memory_id, p
                                    in zip(tally.ids, proposals, strict=True)
                                    if memory_id in created], format_ts(utc_now()))


def _resolve_end(ref: str, local: dict[str, str], where: str) -> str:
    if ref in local:
        return local[ref]
    if ref.startswith("m-"):
        return ref
    message = f"{where}: {ref!r} is neither a memoryId nor the key of a memory in this request"
    raise MemoryValidationError(message, [{"path": where, "message": message}])
