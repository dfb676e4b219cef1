"""Dead letters: tasks parked after ``max_deliveries`` crashed deliveries."""

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
from orchmem.models.storage.delivery import receipts
from orchmem.models.storage.memories.events import add_event
from orchmem.models.storage.schema.tables import (
    DeadLetterRow,
)

logger = logging.getLogger(__name__)

def dead_letter(odb: OrchestratorDB, key: str, task: str, payload: dict[str, Any],
                deliveries: int, error: str) -> None:
    """Park a task that failed ``deliveries`` times; ``orchmem deadletter`` lists and retries it."""
    now = format_ts(utc_now())
    result = {"ok": False, "task": task, "error": {"error": "dead_letter", "message": error}}
    with odb.write():
        (DeadLetterRow.insert(key=key, task=task, payload=json.dumps(payload),
                              deliveries=deliveries, error=error, at=now)
         .on_conflict_replace().execute())
        receipts.finish(key, receipts.DEAD, result)
        add_event("dead_letter", [], after={"key": key, "task": task, "deliveries": deliveries},
                  reason=error, actor="system", key=key)


def dead_letters(odb: OrchestratorDB) -> list[dict[str, Any]]:
    """Tasks parked after ``max_deliveries`` crashed deliveries, oldest first."""
    with odb.read():
        return [{"key": r.key, "task": r.task, "deliveries": r.deliveries, "error": r.error,
                 "at": r.at, "payload": json.loads(r.payload)}
                for r in DeadLetterRow.select().order_by(DeadLetterRow.at)]


def release_dead_letter(odb: OrchestratorDB, key: str) -> dict[str, Any] | None:
    """Take a dead letter out, in one transaction: its row and its receipt go, so the
    task can run again. Returns its ``{"task", "payload"}``, or None when there is none."""
    with odb.write():
        row = DeadLetterRow.get_or_none(DeadLetterRow.key == key)
        if row is None:
            return None
        row.delete_instance()
        receipts.drop(key)
        add_event("dead_letter_retry", [], after={"key": key, "task": row.task},
                  actor="user", key=key)
        return {"task": row.task, "payload": json.loads(row.payload)}


def erase_mentioning(texts: Sequence[str]) -> int:
    """Delete the dead letters whose payload holds any of ``texts`` as written or as
    JSON escapes it (call inside a write transaction). Returns how many went."""
    needles = {form for text in texts if text
               for form in (text, json.dumps(text)[1:-1])}
    gone = 0
    for needle in needles:
        gone += DeadLetterRow.delete().where(DeadLetterRow.payload.contains(needle)).execute()
    return gone


def count(odb: OrchestratorDB) -> int:
    with odb.read():
        return int(DeadLetterRow.select().count())
