"""The outbox: every write an orchestrator publishes is recorded here first.

Redis is a transport and SQLite is the truth. The client records each write-back,
edit and ingest request in ``memory/outbox.db`` before it publishes it; the
reconciler (a beat job, also run when a worker starts) prunes entries whose receipt
is in ``memory.db`` and re-publishes the others once they are older than
``beat.outbox_republish_after_s``. A broker that is down, a Redis that loses its last
second of AOF, a message lost on the way: each delays a write, none loses it. Keys
are idempotency keys, so a re-publish of a write that did land changes nothing.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from peewee import DatabaseError

from orchmem.config import StorageError

from .database import GuardedSqliteDatabase
from .schema import format_ts, utc_now

_DDL = """CREATE TABLE IF NOT EXISTS outbox (
    key TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL,
    published_at TEXT,
    attempts INTEGER NOT NULL DEFAULT 0
)"""


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

    def _sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                if self._db is None or self._db.owner_pid != os.getpid():
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._db = GuardedSqliteDatabase(
                        str(self.path), check_same_thread=False,
                        pragmas=[("journal_mode", "wal"),
                                 ("busy_timeout", self._busy_timeout_ms),
                                 ("synchronous", "FULL")])
                    self._db.execute_sql(_DDL)
                with self._db.atomic("IMMEDIATE"):
                    return list(self._db.execute_sql(query, params).fetchall())
            except (DatabaseError, OSError) as exc:
                raise StorageError(f"outbox {self.path}: {exc}") from exc

    def record(self, key: str, task: str, payload: dict[str, Any]) -> None:
        """Remember a request before it is published (a second record of a key is a no-op)."""
        self._sql("INSERT OR IGNORE INTO outbox (key, task, payload, created_at) "
                  "VALUES (?, ?, ?, ?)", (key, task, json.dumps(payload), format_ts(utc_now())))

    def mark_published(self, key: str) -> None:
        self._sql("UPDATE outbox SET published_at = ?, attempts = attempts + 1 WHERE key = ?",
                  (format_ts(utc_now()), key))

    def entries(self) -> list[Entry]:
        if not self.path.exists():
            return []
        rows = self._sql("SELECT key, task, payload, created_at, published_at, attempts "
                         "FROM outbox ORDER BY created_at, key")
        return [Entry(r[0], r[1], json.loads(r[2]), r[3], r[4], r[5]) for r in rows]

    def never_published(self) -> list[Entry]:
        return [e for e in self.entries() if e.published_at is None]

    def due(self, after_s: float) -> list[Entry]:
        """Entries never published, or last published more than ``after_s`` ago."""
        cutoff = format_ts(utc_now() - timedelta(seconds=after_s))
        return [e for e in self.entries() if e.published_at is None or e.published_at < cutoff]

    def remove(self, keys: list[str]) -> None:
        if keys:
            self._sql(f"DELETE FROM outbox WHERE key IN ({','.join('?' * len(keys))})",
                      tuple(keys))

    def close(self) -> None:
        with self._lock:
            if self._db is not None and self._db.owner_pid == os.getpid() and \
                    not self._db.is_closed():
                self._db.close()
            self._db = None
