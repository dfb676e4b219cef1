"""The audit log (``memory_events``) and the ``meta`` key-value rows."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from ..schema import (
    format_ts,
    utc_now,
)
from .database import OrchestratorDB
from .tables import (
    META_EVENT_WATERMARK,
    MemoryEventRow,
    MetaRow,
)

logger = logging.getLogger(__name__)

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


def bump_meta(key: str) -> int:
    row = MetaRow.get_or_none(MetaRow.key == key)
    value = int(row.value) + 1 if row else 1
    set_meta(key, str(value))
    return value


def watermark(odb: OrchestratorDB) -> int:
    """The id of the last audit event: what a bulletin snapshot says it reflects."""
    return int(odb.meta(META_EVENT_WATERMARK) or 0)
