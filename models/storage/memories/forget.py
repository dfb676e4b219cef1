"""Hard forget: the statements that erase a memory's words from its own row, its
sources and the audit trail (models/governance/derived.py runs them with the rest of its registry).

The row stays (its id anchors the audit tombstone) with empty content and summary, no
subject or value, ``forgotten = 1`` and status ``retracted``, and a memory that
inherited its subject keeps it only if its own words contain it. Every source row is
deleted. Words also live on in the audit trail: every event naming the memory loses
its reason and its content-bearing fields, every edge touching it loses its reason.
"""

from __future__ import annotations

import json
import re
import time

from orchmem.models.core.shapes import Status, format_ts, utc_now
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.execlog import tape
from orchmem.models.storage.memories.events import naming
from orchmem.models.storage.schema.tables import (
    MemoryEdgeRow,
    MemoryEventRow,
    MemoryRow,
    MemorySourceRow,
)

#: Event fields that carry words (or a hash) of a memory's content.
CONTENT_FIELDS = frozenset({"subject", "value", "content", "summary", "statement", "topic",
                            "tags", "metadata"})
_WORD = re.compile(r"\w+")


def erase_row(memory_id: str) -> None:
    """Empty the row of ``memory_id`` (inside a write transaction): its words leave
    ``memories`` (and, by trigger, the live FTS rows). What was derived from them is
    models/governance/derived.py's registry; the caller records the tombstone event afterwards."""
    row = MemoryRow.get(MemoryRow.memory_id == memory_id)
    _release_subject(row)
    (MemoryRow.update(content="", summary="", subject=None, value=None, tags="[]",
                      metadata="{}", time_refs=None,
                      fingerprint=f"forgotten:{memory_id}", forgotten=1,
                      status=Status.RETRACTED.value, updated_at=format_ts(utc_now()))
     .where(MemoryRow.memory_id == memory_id).execute())


def delete_sources(memory_id: str) -> int:
    """Delete every source row of ``memory_id`` (they quote where its words came from)."""
    return int(MemorySourceRow.delete().where(MemorySourceRow.memory == memory_id).execute())


#: Tries of the truncating checkpoint while readers hold old snapshots, and the pause.
CHECKPOINT_TRIES = 40
CHECKPOINT_PAUSE_S = 0.05


def checkpoint_wal(odb: OrchestratorDB) -> bool:
    """Move the pages a hard forget zeroed out of the WAL file and truncate it (outside
    any transaction). A reader in the middle of a snapshot holds the old frames, which
    still hold the words: try again for about two seconds. Returns True once the WAL is
    truncated, False when a reader still held it (the next checkpoint, after the reader
    moves on, takes them out)."""
    for _ in range(CHECKPOINT_TRIES):
        busy = odb.sql("PRAGMA wal_checkpoint(TRUNCATE)")[0][0]
        if not busy:
            return True
        time.sleep(CHECKPOINT_PAUSE_S)
    return False


def _without_content(text: str | None) -> str | None:
    """The JSON object ``text`` without its content-bearing fields (other JSON unchanged)."""
    if text is None:
        return None
    data = json.loads(text)
    if not isinstance(data, dict) or not CONTENT_FIELDS & data.keys():
        return text
    return json.dumps({k: v for k, v in data.items() if k not in CONTENT_FIELDS})


def scrub_audit(memory_id: str) -> None:
    """Keep the audit trail of ``memory_id`` (ops, ids, actors, keys, times), not its words."""
    for event in MemoryEventRow.select().where(naming(memory_id)):
        before, after = _without_content(event.before), _without_content(event.after)
        if (before, after, event.reason) != (event.before, event.after, None):
            event.before, event.after, event.reason = before, after, None
            event.save()
    (MemoryEdgeRow.update(reason=None)
     .where((MemoryEdgeRow.from_memory == memory_id) | (MemoryEdgeRow.to_memory == memory_id))
     .execute())


def _release_subject(row: MemoryRow) -> None:
    """Clear the subject other memories took from ``row`` without saying its words."""
    if not row.subject or ":" not in row.subject:
        return  # a broad subject ("prefer") names no words
    words = set(_WORD.findall(row.subject.split(":", 1)[1].casefold()))
    for other in MemoryRow.select().where(MemoryRow.subject == row.subject,
                                          MemoryRow.memory_id != row.memory_id):
        if not words <= set(_WORD.findall(other.content.casefold())):
            MemoryRow.update(subject=None, value=None).where(MemoryRow.id == other.id).execute()
            tape.release_subject(other.memory_id)  # its snapshots on the log too
