"""Storage of the governance edits: a memory's fields changed in place, a memory marked
invalid. Each runs inside the caller's ``odb.write()`` transaction."""

from __future__ import annotations

from typing import Any

from orchmem.models.core.shapes import Status, format_ts, utc_now
from orchmem.models.storage.schema.tables import MemoryRow


def stored_fields(memory_id: str, names: list[str]) -> dict[str, Any]:
    """The stored values of these columns of ``memory_id`` (and its ``type``)."""
    row = MemoryRow.get(MemoryRow.memory_id == memory_id)
    return {name: getattr(row, name) for name in ["type", *names]}


def set_fields(memory_id: str, changes: dict[str, Any]) -> None:
    """Write ``changes`` (column -> stored value) and the update time."""
    (MemoryRow.update(**changes, updated_at=format_ts(utc_now()))
     .where(MemoryRow.memory_id == memory_id).execute())


def mark_retracted(memory_id: str) -> None:
    set_fields(memory_id, {"status": Status.RETRACTED.value})
