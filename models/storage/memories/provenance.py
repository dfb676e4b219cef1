"""Reading where memories came from: their ``memory_sources`` rows, as values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchmem.models.core.shapes import CapturedBy, Source, SourceType
from orchmem.models.storage.schema.tables import MemorySourceRow

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB


@dataclass(frozen=True)
class CapturedSource:
    """One source of one memory, and when it was captured."""

    memory_id: str
    source: Source
    captured_at: str


def sources_of(odb: OrchestratorDB, memory_ids: Sequence[str]) -> list[CapturedSource]:
    """Every source of ``memory_ids``, oldest first (one statement; share the caller's
    snapshot by calling it inside ``odb.read()``)."""
    if not memory_ids:
        return []
    with odb.bound():
        rows = list(MemorySourceRow.select().where(MemorySourceRow.memory.in_(list(memory_ids)))
                    .order_by(MemorySourceRow.id))
    return [CapturedSource(
        memory_id=row.memory_id,  # type: ignore[attr-defined]
        source=Source.model_construct(
            source_type=SourceType(row.source_type), source_path=row.source_path,
            conversation_id=row.conversation_id, workflow_run_id=row.workflow_run_id,
            step_id=row.step_id, captured_by=CapturedBy(row.captured_by)),
        captured_at=row.captured_at) for row in rows]
