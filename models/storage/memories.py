"""Memories and their sources: insert, reinforce, change status, read.

Every write here runs inside the caller's ``odb.write()`` transaction. Memory ids
are derived from the idempotency key and the candidate's position, so even a
replay after its receipt was garbage-collected lands on the same ids.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from ..schema import (
    CapturedBy,
    MemoryInput,
    MemoryNode,
    MemoryType,
    Source,
    SourceType,
    Status,
    content_fingerprint,
    format_ts,
    utc_now,
)
from .database import OrchestratorDB
from .events import add_event
from .tables import (
    MemoryEventRow,
    MemoryRow,
    MemorySourceRow,
    live_rows,
)

logger = logging.getLogger(__name__)

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


def list_memories(odb: OrchestratorDB, *, status: Status | None = Status.ACTIVE,
                  types: Sequence[str] | None = None, limit: int = 100,
                  offset: int = 0) -> list[MemoryNode]:
    """Memories newest first, filtered by status (None = any) and types."""
    with odb.read():
        query = MemoryRow.select().where(live_rows())
        if status is not None:
            query = query.where(MemoryRow.status == status.value)
        if types:
            query = query.where(MemoryRow.type.in_(list(types)))
        query = query.order_by(MemoryRow.created_at.desc(), MemoryRow.memory_id).limit(limit)
        return [row_to_node(r, odb.orchestrator_id) for r in query.offset(offset)]


def get_nodes(odb: OrchestratorDB, memory_ids: Sequence[str]) -> list[MemoryNode]:
    """These memories (any status, forgotten ones left out), in the order asked; unknown
    ids are left out."""
    if not memory_ids:
        return []
    with odb.read():
        rows = {r.memory_id: r for r in MemoryRow.select().where(
            MemoryRow.memory_id.in_(list(memory_ids)), live_rows())}
    return [row_to_node(rows[m], odb.orchestrator_id) for m in memory_ids if m in rows]
