"""The audit log (``memory_events`` and its index by memory id) and the ``meta`` rows."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from orchmem.models.core.shapes import (
    format_ts,
    utc_now,
)
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.db.statements import run, run_many
from orchmem.models.storage.schema.migrations import schema_version
from orchmem.models.storage.schema.tables import (
    META_EVENT_WATERMARK,
    MemoryEventIdRow,
    MemoryEventRow,
    MetaRow,
)

logger = logging.getLogger(__name__)

#: The first schema with ``memory_event_ids``.
EVENT_INDEX_SCHEMA = 2


def add_event(op: str, memory_ids: Sequence[str], *, before: Any = None, after: Any = None,
              reason: str | None = None, actor: str = "system", key: str | None = None) -> int:
    """Append one audit row and its ``memory_event_ids`` pairs, and a fresh snapshot on
    the execution log of each memory that has one there; call inside a write
    transaction. Returns the event's id (the watermark)."""
    at = format_ts(utc_now())
    event_id = int(run(_ADD_EVENT, (
        op, json.dumps(list(memory_ids)),
        json.dumps(before) if before is not None else None,
        json.dumps(after) if after is not None else None,
        reason, actor, key, at)).lastrowid)
    run_many("INSERT INTO memory_event_ids (memory_id, event_id) VALUES (?, ?)",
             [(m, event_id) for m in dict.fromkeys(memory_ids)])
    set_meta(META_EVENT_WATERMARK, str(event_id))
    if memory_ids:
        # a memory with snapshots on the log gets a fresh one (execlog/tape.py, which
        # imports this module's neighbours: imported here, not at the top)
        from orchmem.models.storage.execlog import tape
        tape.after_audit(op, memory_ids, event_id, at)
    return event_id


_ADD_EVENT = ("INSERT INTO memory_events (op, memory_ids, before, after, reason, actor, "
              "idempotency_key, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


def naming(memory_id: str) -> Any:
    """A condition on ``MemoryEventRow``: the events whose ``memory_ids`` hold ``memory_id``
    (inside a bound block).

    It searches ``memory_event_ids``. A reader may hold a schema-1 file that no writer
    has migrated yet (readers never migrate): there it is the scan of the JSON lists
    that schema 1 had, which gives the same events.
    """
    if schema_version() >= EVENT_INDEX_SCHEMA:
        return MemoryEventRow.id.in_(MemoryEventIdRow.select(MemoryEventIdRow.event)
                                     .where(MemoryEventIdRow.memory_id == memory_id))
    # memory_ids is a JSON list of ids; the quoted id cannot match inside another id.
    return MemoryEventRow.memory_ids.contains(f'"{memory_id}"')


def set_meta(key: str, value: str) -> None:
    run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def bump_meta(key: str) -> int:
    row = MetaRow.get_or_none(MetaRow.key == key)
    value = int(row.value) + 1 if row else 1
    set_meta(key, str(value))
    return value


def watermark(odb: OrchestratorDB) -> int:
    """The id of the last audit event: what a bulletin snapshot says it reflects."""
    return int(odb.meta(META_EVENT_WATERMARK) or 0)


def ops_since(odb: OrchestratorDB, after: int, limit: int = 10_000) -> dict[str, int]:
    """How many audit events of each op follow event ``after`` (at most ``limit`` read,
    one range of the primary key): what working.md's freshness check counts."""
    rows = odb.sql("SELECT op, count(*) FROM (SELECT op FROM memory_events WHERE id > ? "
                   "ORDER BY id LIMIT ?) GROUP BY op", (after, limit))
    return {str(op): int(count) for op, count in rows}
