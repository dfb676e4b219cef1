"""The outbox: every write an orchestrator publishes is recorded here first.

Redis is a transport and SQLite is the truth. The client records each write-back,
edit and ingest request in ``memory/outbox.db`` before it publishes it; the
reconciler (a beat job, also run when a worker starts) prunes entries whose receipt
is in ``memory.db`` and re-publishes the others once they are older than
``beat.outbox_republish_after_s``. A broker that is down, a Redis that loses its last
second of AOF, a message lost on the way: each delays a write, none loses it. Keys
are idempotency keys, so a re-publish of a write that did land changes nothing.

Payloads hold the text of what was said, so a hard forget erases the entries that
are done (:func:`prune_done` with ``erase``): freed pages are zeroed
(``secure_delete``) and the WAL is checkpointed and truncated, so no copy is left in
``outbox.db`` or its ``-wal``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from peewee import DatabaseError

from orchmem.config import StorageError
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.storage.db.database import GuardedSqliteDatabase, OrchestratorDB
from orchmem.models.storage.delivery import receipts
from orchmem.models.workspace.private import private_database, private_dir

#: Keys per ``IN (...)`` list: well under SQLite's bound-variable limit.
_CHUNK = 500

_DDL = """CREATE TABLE IF NOT EXISTS outbox (
    key TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL,
    published_at TEXT,
    attempts INTEGER NOT NULL DEFAULT 0
)"""


#: The catch-up and the reconciler ask for the oldest unpublished or overdue entries: an
#: index keeps that a few steps at 100,000 pending entries instead of a scan and a sort.
_PENDING_INDEX = ("CREATE INDEX IF NOT EXISTS outbox_pending "
                  "ON outbox (published_at, created_at, key)")


@dataclass(frozen=True)
class Entry:
    key: str
    task: str
    payload: dict[str, Any]
    created_at: str
    published_at: str | None
    attempts: int


class Outbox:
    """One orchestrator's outbox file (created on first use)."""

    def __init__(self, path: Path, busy_timeout_ms: int = 10_000) -> None:
        self.path = path
        self._db: GuardedSqliteDatabase | None = None
        self._lock = threading.Lock()
        self._busy_timeout_ms = busy_timeout_ms

    def _connect(self) -> GuardedSqliteDatabase:
        """This process's connection (call holding ``_lock``)."""
        if self._db is None or self._db.owner_pid != os.getpid():
            private_dir(self.path.parent)
            private_database(self.path)  # its -wal and -shm take its mode
            self._db = GuardedSqliteDatabase(
                str(self.path), check_same_thread=False,
                pragmas=[("journal_mode", "wal"),
                         ("busy_timeout", self._busy_timeout_ms),
                         ("synchronous", "FULL"),
                         # Freed cells are zeroed: an erased payload leaves no text.
                         ("secure_delete", 1)])
            self._db.execute_sql(_DDL)
            self._db.execute_sql(_PENDING_INDEX)
        return self._db

    def _sql(self, query: str, params: tuple[Any, ...] = (), *,
             transaction: bool = True, durable: bool = True) -> list[tuple[Any, ...]]:
        """``durable=False``: the commit does not wait for the disk (``synchronous=NORMAL``
        for this statement, in WAL mode): it survives a crash of the process, the next
        durable commit syncs it too (the WAL is synced as a whole), and only a power loss
        before that may undo it."""
        with self._lock:
            try:
                db = self._connect()
                if not transaction:  # a checkpoint cannot run inside a transaction
                    return list(db.execute_sql(query, params).fetchall())
                if not durable:
                    db.execute_sql("PRAGMA synchronous = NORMAL")
                try:
                    with db.atomic("IMMEDIATE"):
                        return list(db.execute_sql(query, params).fetchall())
                finally:
                    if not durable:
                        db.execute_sql("PRAGMA synchronous = FULL")
            except (DatabaseError, OSError) as exc:
                raise StorageError(f"outbox {self.path}: {exc}") from exc

    def record(self, key: str, task: str, payload: dict[str, Any]) -> None:
        """Remember a request before it is published (a second record of a key is a no-op)."""
        self._sql("INSERT OR IGNORE INTO outbox (key, task, payload, created_at) "
                  "VALUES (?, ?, ?, ?)", (key, task, json.dumps(payload), format_ts(utc_now())))

    def mark_published(self, key: str) -> None:
        """Note that ``key`` was sent. Not synced to the disk at once: a mark a power loss
        undoes leaves the entry unpublished, and the reconciler sends it once more (keys
        are idempotency keys); what must survive, the request itself, :meth:`record` syncs."""
        self._sql("UPDATE outbox SET published_at = ?, attempts = attempts + 1 WHERE key = ?",
                  (format_ts(utc_now()), key), durable=False)

    def _select(self, where: str = "", params: tuple[Any, ...] = (),
                limit: int | None = None) -> list[Entry]:
        if not self.path.exists():
            return []
        query = ("SELECT key, task, payload, created_at, published_at, attempts FROM outbox "
                 f"{where} ORDER BY created_at, key")
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        rows = self._sql(query, params)
        return [Entry(r[0], r[1], json.loads(r[2]), r[3], r[4], r[5]) for r in rows]

    def entries(self) -> list[Entry]:
        """Every entry, oldest first (payloads parsed: for inspection and tests)."""
        return self._select()

    def keys(self) -> list[str]:
        """The keys of every entry, without reading their payloads."""
        if not self.path.exists():
            return []
        return [r[0] for r in self._sql("SELECT key FROM outbox ORDER BY created_at, key")]

    def keys_of(self, tasks: Sequence[str]) -> list[str]:
        """The keys of the entries of these ``tasks`` (a missing file has none)."""
        if not self.path.exists() or not tasks:
            return []
        marks = ",".join("?" * len(tasks))
        return [r[0] for r in self._sql(f"SELECT key FROM outbox WHERE task IN ({marks})",
                                        tuple(tasks))]

    def never_published(self, limit: int | None = None) -> list[Entry]:
        """Entries never published, oldest first (at most ``limit``)."""
        return self._select("WHERE published_at IS NULL", limit=limit)

    def due(self, after_s: float, limit: int | None = None) -> list[Entry]:
        """Entries never published, or last published more than ``after_s`` ago."""
        cutoff = format_ts(utc_now() - timedelta(seconds=after_s))
        return self._select("WHERE published_at IS NULL OR published_at < ?", (cutoff,),
                            limit=limit)

    def remove(self, keys: list[str], *, erase: bool = False) -> None:
        """Delete these entries; ``erase`` also checkpoints the WAL and truncates it, so no
        copy of their payloads is left in ``outbox.db`` or its ``-wal``."""
        for start in range(0, len(keys), _CHUNK):
            chunk = tuple(keys[start:start + _CHUNK])
            self._sql(f"DELETE FROM outbox WHERE key IN ({','.join('?' * len(chunk))})", chunk)
        if erase:
            self._sql("PRAGMA wal_checkpoint(TRUNCATE)", transaction=False)

    def close(self) -> None:
        with self._lock:
            if self._db is not None and self._db.owner_pid == os.getpid() and \
                    not self._db.is_closed():
                self._db.close()
            self._db = None


def prune_done(outbox: Outbox, odb: OrchestratorDB, *, erase: bool = False) -> list[str]:
    """Remove the entries whose receipt in ``odb`` is final; returns the keys left.

    ``erase`` as in :meth:`Outbox.remove`. A missing outbox file is left missing.
    Raises StorageError when the outbox cannot be read or written.
    """
    keys = outbox.keys()
    final = receipts.final_keys(odb, keys) if keys else set()
    if final or (erase and outbox.path.exists()):
        outbox.remove(sorted(final), erase=erase)
    return [k for k in keys if k not in final]


def writes_in_flight(odb: OrchestratorDB, tasks: Sequence[str], *, besides: str,
                     within_s: float) -> bool:
    """Whether a write of ``tasks`` for this orchestrator may still land: one delivered
    and not finished (a ``started`` receipt updated within ``within_s``: its worker
    crashed, it will be redelivered), or one recorded in the outbox with no final
    receipt (lost on its way, the reconciler sends it again). ``besides``: the asking
    task's own key. Raises StorageError when either file cannot be read."""
    if receipts.started_since(odb, tasks, within_s, besides=besides):
        return True
    outbox = Outbox(odb.workspace.outbox_path, odb.settings.worker.busy_timeout_ms)
    try:
        keys = [k for k in outbox.keys_of(tasks) if k != besides]
    finally:
        outbox.close()
    return bool(keys) and len(receipts.final_keys(odb, keys)) < len(set(keys))
