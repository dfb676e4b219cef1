"""Writes to one orchestrator's memory: receipts, memories, sources, edges, embeddings, events.

Every public write here runs inside one ``odb.write()`` transaction, and the task
receipt that makes it idempotent commits in that same transaction: a redelivered
task finds the receipt and writes nothing. Memory ids are derived from the
idempotency key and the candidate's position, so even a replay after its receipt was
garbage-collected lands on the same ids instead of creating copies.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from peewee import JOIN

from orchmem.config import MemoryNotFound, StorageError

from .database import OrchestratorDB
from .embedding import vector_to_blob
from .schema import (
    CapturedBy,
    EdgeInput,
    EdgeType,
    MemoryEdge,
    MemoryInput,
    MemoryNode,
    MemoryType,
    Source,
    SourceType,
    Status,
    check_memory_id,
    content_fingerprint,
    derive_id,
    format_ts,
    utc_now,
)
from .tables import (
    META_EMBEDDING_DELETES,
    META_EMBEDDING_SEQ,
    META_EVENT_WATERMARK,
    DeadLetterRow,
    MemoryEdgeRow,
    MemoryEmbeddingRow,
    MemoryEventRow,
    MemoryRow,
    MemorySourceRow,
    MetaRow,
    TaskReceiptRow,
)

logger = logging.getLogger(__name__)

RECEIPT_STARTED = "started"
RECEIPT_DONE = "done"
RECEIPT_REJECTED = "rejected"
RECEIPT_DEAD = "dead"
FINAL_RECEIPTS = frozenset({RECEIPT_DONE, RECEIPT_REJECTED, RECEIPT_DEAD})


# ---------------------------------------------------------------------------- receipts


@dataclass(frozen=True)
class Delivery:
    """What the receipt table knew when a task was delivered."""

    key: str
    deliveries: int
    status: str
    result: dict[str, Any] | None

    @property
    def finished(self) -> bool:
        return self.status in FINAL_RECEIPTS


def record_delivery(odb: OrchestratorDB, key: str, task: str) -> Delivery:
    """Count one more delivery of ``key`` (committed at once, so crashes are counted too)."""
    now = format_ts(utc_now())
    with odb.write():
        row = TaskReceiptRow.get_or_none(TaskReceiptRow.key == key)
        if row is None:
            row = TaskReceiptRow.create(key=key, task=task, status=RECEIPT_STARTED,
                                        deliveries=1, first_seen_at=now, updated_at=now)
        elif row.status not in FINAL_RECEIPTS:
            row.deliveries += 1
            row.updated_at = now
            row.save()
        result = json.loads(row.result) if row.result else None
        return Delivery(key=key, deliveries=row.deliveries, status=row.status, result=result)


def release_delivery(odb: OrchestratorDB, key: str) -> None:
    """Undo the count of a delivery that ended in a handled error (not a crash)."""
    try:
        with odb.write():
            (TaskReceiptRow.update(deliveries=TaskReceiptRow.deliveries - 1)
             .where(TaskReceiptRow.key == key, TaskReceiptRow.deliveries > 0,
                    TaskReceiptRow.status.not_in(list(FINAL_RECEIPTS))).execute())
    except StorageError as exc:
        logger.warning("could not release delivery of %s: %s", key, exc)


def finish_receipt(key: str, status: str, result: dict[str, Any]) -> None:
    """Store the outcome of ``key``; call inside the transaction that wrote the data."""
    now = format_ts(utc_now())
    updated = (TaskReceiptRow.update(status=status, result=json.dumps(result), updated_at=now)
               .where(TaskReceiptRow.key == key).execute())
    if not updated:
        TaskReceiptRow.create(key=key, task=result.get("task", "?"), status=status,
                              result=json.dumps(result), deliveries=1,
                              first_seen_at=now, updated_at=now)


def reject_task(odb: OrchestratorDB, key: str, result: dict[str, Any]) -> None:
    """Record that ``key`` was rejected (bad payload): a redelivery returns the same error."""
    with odb.write():
        finish_receipt(key, RECEIPT_REJECTED, result)


def dead_letter(odb: OrchestratorDB, key: str, task: str, payload: dict[str, Any],
                deliveries: int, error: str) -> None:
    """Park a task that failed ``deliveries`` times; ``orchmem deadletter`` lists and retries it."""
    now = format_ts(utc_now())
    result = {"ok": False, "task": task, "error": {"error": "dead_letter", "message": error}}
    with odb.write():
        (DeadLetterRow.insert(key=key, task=task, payload=json.dumps(payload),
                              deliveries=deliveries, error=error, at=now)
         .on_conflict_replace().execute())
        finish_receipt(key, RECEIPT_DEAD, result)
        add_event("dead_letter", [], after={"key": key, "task": task, "deliveries": deliveries},
                  reason=error, actor="system", key=key)


# ---------------------------------------------------------------------------- events


def add_event(op: str, memory_ids: Sequence[str], *, before: Any = None, after: Any = None,
              reason: str | None = None, actor: str = "system", key: str | None = None) -> int:
    """Append one audit row; call inside a write transaction. Returns its id (the watermark)."""
    row = MemoryEventRow.create(
        op=op,
        memory_ids=json.dumps(list(memory_ids)),
        before=json.dumps(before) if before is not None else None,
        after=json.dumps(after) if after is not None else None,
        reason=reason,
        actor=actor,
        idempotency_key=key,
        at=format_ts(utc_now()),
    )
    set_meta(META_EVENT_WATERMARK, str(row.id))
    return int(row.id)


def set_meta(key: str, value: str) -> None:
    MetaRow.insert(key=key, value=value).on_conflict_replace().execute()


def _bump_meta(key: str) -> int:
    row = MetaRow.get_or_none(MetaRow.key == key)
    value = int(row.value) + 1 if row else 1
    set_meta(key, str(value))
    return value


# ---------------------------------------------------------------------------- writes


def insert_memory(odb: OrchestratorDB, memory_id: str, memory: MemoryInput, *, key: str,
                  fingerprint: str | None = None, subject: str | None = None,
                  value: str | None = None, stated: bool = False) -> MemoryRow:
    """Insert a new active memory and its first source row (inside a write transaction)."""
    now = utc_now()
    created = format_ts(memory.created_at or now)
    src = memory.source
    row = MemoryRow.create(
        memory_id=memory_id,
        type=memory.type.value,
        importance=memory.importance,
        content=memory.content,
        summary=memory.summary_or_default,
        confidence=memory.confidence,
        status=Status.ACTIVE.value,
        **_provenance(src),
        fingerprint=fingerprint or content_fingerprint(memory.type.value, memory.content),
        subject=subject,
        value=value,
        stated=int(stated),
        created_at=created,
        updated_at=format_ts(now),
    )
    add_source(memory_id, src, key=key, at=created)
    return row


def _provenance(src: Source) -> dict[str, Any]:
    """The provenance columns shared by ``memories`` and ``memory_sources``."""
    return {"source_type": src.source_type.value, "source_path": src.source_path,
            "conversation_id": src.conversation_id, "workflow_run_id": src.workflow_run_id,
            "step_id": src.step_id, "captured_by": src.captured_by.value}


def add_source(memory_id: str, src: Source, *, key: str | None, at: str | None = None) -> None:
    MemorySourceRow.create(
        memory=memory_id,
        **_provenance(src),
        task_key=key,
        captured_at=at or format_ts(utc_now()),
    )


def _place(src: Source) -> tuple[Any, ...]:
    """Where a statement was made: its provenance without ``capturedBy``."""
    return (src.source_type.value, src.conversation_id, src.workflow_run_id, src.step_id,
            src.source_path)


def _statement(src: Source, fingerprint: str) -> str:
    """An opaque id of "these words, from this place" (no text of either is stored)."""
    return hashlib.sha256(json.dumps([*_place(src), fingerprint]).encode()).hexdigest()[:32]


def said_before(row: MemoryRow, memory: MemoryInput) -> bool:
    """True when ``row`` already holds ``memory``'s statement: the same place (sourceType,
    conversationId, workflowRunId, stepId, sourcePath) said the same normalized content.

    A conversation sent again under a new key (an orchestrator that re-sends the whole
    transcript each turn) must not count as new evidence. A source that names no place
    (a manual note, a diagnostics finding without a run) is never a repeat: two such
    notes are two acts, not one message seen twice.
    """
    src = memory.source
    if src.conversation_id is None and src.workflow_run_id is None and src.step_id is None \
            and src.source_path is None:
        return False
    columns: list[Any] = [MemorySourceRow.source_type, MemorySourceRow.conversation_id,
                          MemorySourceRow.workflow_run_id, MemorySourceRow.step_id,
                          MemorySourceRow.source_path]
    same_place = [MemorySourceRow.memory == row.memory_id] + [
        column.is_null() if value is None else column == value
        for column, value in zip(columns, _place(src), strict=True)]
    sources = list(MemorySourceRow.select(MemorySourceRow.id, MemorySourceRow.task_key)
                   .where(*same_place).order_by(MemorySourceRow.id))
    if not sources:
        return False
    fingerprint = content_fingerprint(memory.type.value, memory.content)
    first = (MemorySourceRow.select(MemorySourceRow.id)
             .where(MemorySourceRow.memory == row.memory_id)
             .order_by(MemorySourceRow.id).first())
    if fingerprint == row.fingerprint and first is not None and first.id == sources[0].id:
        return True  # the words the memory was created from, from the place that said them
    keys = sorted({s.task_key for s in sources if s.task_key})
    if not keys:
        return False
    statement = _statement(src, fingerprint)
    # memory_events has no index on the key: this scan runs only for a candidate whose
    # place already reinforced this memory, never on the plain create/reinforce path.
    earlier = (MemoryEventRow.select(MemoryEventRow.after)
               .where(MemoryEventRow.op == "reinforce",
                      MemoryEventRow.idempotency_key.in_(keys),
                      MemoryEventRow.memory_ids.contains(f'"{row.memory_id}"')))
    return any(json.loads(e.after or "{}").get("statement") == statement for e in earlier)


def reinforce(row: MemoryRow, memory: MemoryInput, *, key: str) -> None:
    """Strengthen an existing memory restated by ``memory`` (inside a write transaction).

    Confidence moves halfway toward certainty by the new evidence's confidence
    (``c + (1 - c) * c_new / 2``), importance takes the higher of the two, and the
    restatement is recorded as one more source row. The event keeps an opaque id of
    the statement, which :func:`said_before` uses to recognize the same words from the
    same place. Call :func:`said_before` first: a repeat must change nothing.
    """
    before = {"confidence": row.confidence, "importance": row.importance}
    gained = (1 - row.confidence) * memory.confidence / 2
    row.confidence = round(min(1.0, row.confidence + gained), 6)
    row.importance = max(row.importance, memory.importance)
    row.reinforcements += 1
    row.updated_at = format_ts(utc_now())
    row.save()
    add_source(row.memory_id, memory.source, key=key)
    statement = _statement(memory.source,
                           content_fingerprint(memory.type.value, memory.content))
    add_event("reinforce", [row.memory_id], before=before,
              after={"confidence": row.confidence, "importance": row.importance,
                     "statement": statement},
              actor=memory.source.captured_by.value, key=key)


def set_status(row: MemoryRow, status: Status, *, reason: str | None, actor: str,
               key: str | None, by: str | None = None) -> None:
    """Change a memory's status and audit it (inside a write transaction)."""
    before = row.status
    row.status = status.value
    row.updated_at = format_ts(utc_now())
    row.save()
    op = {Status.SUPERSEDED: "supersede", Status.RETRACTED: "retract",
          Status.ACTIVE: "reactivate"}[status]
    add_event(op, [row.memory_id, *([by] if by else [])], before={"status": before},
              after={"status": status.value, **({"by": by} if by else {})},
              reason=reason, actor=actor, key=key)


def store_embeddings(ids_and_vectors: Iterable[tuple[str, np.ndarray]], embedder: str) -> int:
    """Upsert vectors (inside a write transaction); each gets a new change seq."""
    now = format_ts(utc_now())
    rows = list(ids_and_vectors)
    if not rows:
        return 0
    row = MetaRow.get_or_none(MetaRow.key == META_EMBEDDING_SEQ)
    first = (int(row.value) if row else 0) + 1
    (MemoryEmbeddingRow.insert_many([
        {"memory": memory_id, "embedder": embedder, "dim": int(vector.shape[0]),
         "vector": vector_to_blob(vector), "seq": first + i, "updated_at": now}
        for i, (memory_id, vector) in enumerate(rows)]).on_conflict_replace().execute())
    set_meta(META_EMBEDDING_SEQ, str(first + len(rows) - 1))
    return len(rows)


def delete_embedding(memory_id: str) -> None:
    if MemoryEmbeddingRow.delete().where(MemoryEmbeddingRow.memory == memory_id).execute():
        _bump_meta(META_EMBEDDING_DELETES)


def insert_edge(odb: OrchestratorDB, edge: EdgeInput, *, from_id: str, to_id: str, key: str | None,
                actor: str) -> str:
    """Create (or keep) an edge between two memories of this orchestrator."""
    for end in (from_id, to_id):
        check_memory_id(end, odb.orchestrator_id, where="edge")
        if not MemoryRow.select().where(MemoryRow.memory_id == end).exists():
            raise MemoryNotFound(f"edge end {end} is not a memory of {odb.orchestrator_id!r}")
    edge_id = derive_id("e", odb.orchestrator_id, from_id, to_id, edge.edge_type.value)
    inserted = (MemoryEdgeRow.insert(
        edge_id=edge_id, from_memory=from_id, to_memory=to_id, edge_type=edge.edge_type.value,
        weight=edge.weight, reason=edge.reason, created_at=format_ts(utc_now()),
    ).on_conflict_ignore().execute())
    if inserted:
        add_event("link", [from_id, to_id],
                  after={"edgeId": edge_id, "edgeType": edge.edge_type.value,
                         "weight": edge.weight},
                  reason=edge.reason, actor=actor, key=key)
    return edge_id


# ---------------------------------------------------------------------------- reads


def row_to_node(row: MemoryRow, orchestrator_id: str) -> MemoryNode:
    return MemoryNode.model_construct(
        memory_id=row.memory_id,
        orchestrator_id=orchestrator_id,
        type=MemoryType(row.type),
        importance=row.importance,
        content=row.content,
        summary=row.summary,
        confidence=row.confidence,
        source=Source.model_construct(
            source_type=SourceType(row.source_type), source_path=row.source_path,
            conversation_id=row.conversation_id, workflow_run_id=row.workflow_run_id,
            step_id=row.step_id, captured_by=CapturedBy(row.captured_by),
        ),
        status=Status(row.status),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def row_to_edge(row: MemoryEdgeRow) -> MemoryEdge:
    return MemoryEdge.model_construct(
        edge_id=row.edge_id,
        from_memory_id=row.from_memory_id,  # type: ignore[attr-defined]
        to_memory_id=row.to_memory_id,  # type: ignore[attr-defined]
        edge_type=EdgeType(row.edge_type),
        weight=row.weight,
        reason=row.reason,
        created_at=row.created_at,
    )


def list_memories(odb: OrchestratorDB, *, status: Status | None = Status.ACTIVE,
                  types: Sequence[str] | None = None, limit: int = 100,
                  offset: int = 0) -> list[MemoryNode]:
    """Memories newest first, filtered by status (None = any) and types."""
    with odb.read():
        query = MemoryRow.select().where(MemoryRow.forgotten == 0)
        if status is not None:
            query = query.where(MemoryRow.status == status.value)
        if types:
            query = query.where(MemoryRow.type.in_(list(types)))
        query = query.order_by(MemoryRow.created_at.desc(), MemoryRow.memory_id).limit(limit)
        return [row_to_node(r, odb.orchestrator_id) for r in query.offset(offset)]


def edges_touching(memory_ids: Sequence[str]) -> list[MemoryEdgeRow]:
    """Edges with at least one end in ``memory_ids`` (inside a bound block)."""
    if not memory_ids:
        return []
    ids = list(memory_ids)
    return list(MemoryEdgeRow.select()
                .where(MemoryEdgeRow.from_memory.in_(ids) | MemoryEdgeRow.to_memory.in_(ids))
                .order_by(MemoryEdgeRow.edge_id))


def dead_letters(odb: OrchestratorDB) -> list[dict[str, Any]]:
    """Tasks parked after ``max_deliveries`` crashed deliveries, oldest first."""
    with odb.read():
        return [{"key": r.key, "task": r.task, "deliveries": r.deliveries, "error": r.error,
                 "at": r.at, "payload": json.loads(r.payload)}
                for r in DeadLetterRow.select().order_by(DeadLetterRow.at)]


def release_dead_letter(key: str) -> dict[str, Any] | None:
    """Take a dead letter out (inside a write transaction): its row and its receipt go,
    so the task can run again. Returns its ``{"task", "payload"}``, or None."""
    row = DeadLetterRow.get_or_none(DeadLetterRow.key == key)
    if row is None:
        return None
    row.delete_instance()
    TaskReceiptRow.delete().where(TaskReceiptRow.key == key).execute()
    add_event("dead_letter_retry", [], after={"key": key, "task": row.task}, actor="user",
              key=key)
    return {"task": row.task, "payload": json.loads(row.payload)}


def stats(odb: OrchestratorDB) -> dict[str, Any]:
    """Counts per type and status, embeddings missing, edges, events, receipts, sizes."""
    with odb.read():
        by_type: dict[str, dict[str, int]] = {}
        sql = odb.db.execute_sql
        for memory_type, status, n in sql(
                "SELECT type, status, count(*) FROM memories GROUP BY type, status"):
            by_type.setdefault(memory_type, {})[status] = n
        by_status: dict[str, int] = {}
        for counts in by_type.values():
            for status, n in counts.items():
                by_status[status] = by_status.get(status, 0) + n
        missing = (MemoryRow.select()
                   .join(MemoryEmbeddingRow, on=(MemoryEmbeddingRow.memory == MemoryRow.memory_id),
                         join_type=JOIN.LEFT_OUTER)
                   .where(MemoryEmbeddingRow.memory.is_null(), MemoryRow.forgotten == 0)
                   .count())
        last_event = MemoryEventRow.select().order_by(MemoryEventRow.id.desc()).first()
        last_ingest = sql("SELECT max(at) FROM ingest_manifest").fetchone()[0]
        return {
            "orchestratorId": odb.orchestrator_id,
            "memories": sum(by_status.values()),
            "byStatus": by_status,
            "byType": by_type,
            "edges": MemoryEdgeRow.select().count(),
            "embeddingsMissing": missing,
            "embedders": dict(sql(
                "SELECT embedder, count(*) FROM memory_embeddings GROUP BY embedder")),
            "events": MemoryEventRow.select().count(),
            "lastEventAt": last_event.at if last_event else None,
            "lastIngestAt": last_ingest,
            "lastBulletinAt": _bulletin_time(odb.workspace.bulletins_dir / "latest.json"),
            "receipts": TaskReceiptRow.select().count(),
            "deadLetters": DeadLetterRow.select().count(),
            "dbBytes": odb.workspace.db_path.stat().st_size,
            "walBytes": _size(odb.workspace.db_path.with_name("memory.db-wal")),
        }


def _bulletin_time(path: Any) -> str | None:
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["generatedAt"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _size(path: Any) -> int:
    try:
        return int(path.stat().st_size)
    except OSError:
        return 0

