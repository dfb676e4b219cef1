"""The receipt protocol: idempotency key -> delivery count, status and result.

A task's receipt goes through these states, and only this module writes them:

- ``started``: from the first delivery, committed at once (:func:`begin`), so that a
  delivery which crashes its worker is counted too. That commit does not wait for the
  disk (``OrchestratorDB.write(durable=False)``): a crashed process leaves it in the
  WAL, and the task's own commit, durable, syncs it with the rest; a power loss
  before that forgets one count of a task not yet acknowledged. A handled, non-crash failure (a
  deliberate retry, a transient storage error) takes its count back (:func:`release`).
- ``done``: the task's result, committed in the same transaction as the data it wrote
  (:func:`finish`, inside that transaction) or, for a task whose data is elsewhere (an
  ingest scan, a re-embed run), by :func:`complete` right after it.
- ``rejected``: a payload that failed validation (:func:`reject`); a redelivery answers
  the same error.
- ``dead``: delivered more than ``max_deliveries`` times without finishing (see
  :mod:`.deadletters`).

The task pipeline (:mod:`orchmem.tasks.pipeline`) drives this for every task, and
completes a receipt its task left open, so no task can forget it. The client and the
outbox read receipts only through :func:`status`, :func:`is_final` and :func:`final_keys`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from orchmem.config import StorageError
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.db.statements import placeholders, run, run_many
from orchmem.models.storage.schema.tables import TaskReceiptRow

logger = logging.getLogger(__name__)

STARTED = "started"
DONE = "done"
REJECTED = "rejected"
DEAD = "dead"
FINAL = frozenset({DONE, REJECTED, DEAD})
#: Keys per ``IN (...)`` list: well under SQLite's bound-variable limit (32,766).
_CHUNK = 500


@dataclass(frozen=True)
class Delivery:
    """What the receipt table knew when a task was delivered."""

    key: str
    deliveries: int
    status: str
    result: dict[str, Any] | None

    @property
    def finished(self) -> bool:
        return self.status in FINAL


def begin(odb: OrchestratorDB, key: str, task: str, *, count: bool = True) -> Delivery:
    """Count one more delivery of ``key`` (committed at once, so crashes are counted too).

    ``count=False``: this delivery was counted already (by :func:`begin_batch`); only
    read the receipt (creating it if it is missing)."""
    now = format_ts(utc_now())
    with odb.write(durable=False):
        row = run(_READ, (key,)).fetchone()
        if row is None:
            run(_CREATE, (key, task, STARTED, now, now))
            return Delivery(key=key, deliveries=1, status=STARTED, result=None)
        status_, deliveries, result = row
        if count and status_ not in FINAL:
            deliveries += 1
            run("UPDATE task_receipts SET deliveries = ?, updated_at = ? WHERE key = ?",
                (deliveries, now, key))
        return Delivery(key=key, deliveries=deliveries, status=status_,
                        result=json.loads(result) if result else None)


_READ = "SELECT status, deliveries, result FROM task_receipts WHERE key = ?"
_CREATE = ("INSERT INTO task_receipts (key, task, status, deliveries, first_seen_at, "
           "updated_at) VALUES (?, ?, ?, 1, ?, ?)")


#: What :func:`begin_batch` found for a key: none (it created it), a final receipt
#: (the task ran before: it will answer as a duplicate), or a delivery that did not
#: finish (a crashed batch) or the same key earlier in the batch.
FRESH, FOUND_FINAL, AGAIN = "fresh", "final", "again"


def begin_batch(odb: OrchestratorDB, keys: Sequence[tuple[str, str]]) -> list[str]:
    """Count the first delivery of each ``(key, task)`` in one commit, for a batch.

    Returns, in input order, :data:`FRESH` (this call created its receipt),
    :data:`FOUND_FINAL` or :data:`AGAIN` (left as it is: the batch runs that task on
    its own, counted then).
    """
    now = format_ts(utc_now())
    found: list[str] = []
    seen: set[str] = set()
    fresh: list[tuple[str, str, str, str, str]] = []
    with odb.write(durable=False):
        stored = _statuses([key for key, _ in keys])
        for key, task in keys:
            if key in seen or (key in stored and stored[key] not in FINAL):
                found.append(AGAIN)
            elif key in stored:
                found.append(FOUND_FINAL)
            else:
                fresh.append((key, task, STARTED, now, now))
                found.append(FRESH)
            seen.add(key)
        run_many(_CREATE, fresh)
    return found


def _statuses(keys: Sequence[str]) -> dict[str, str]:
    """key -> status of those of ``keys`` that have a receipt (in chunks; in a bound block)."""
    unique = sorted(set(keys))
    found: dict[str, str] = {}
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start:start + _CHUNK]
        found.update(run(f"SELECT key, status FROM task_receipts WHERE key IN "
                         f"({placeholders(len(chunk))})", chunk).fetchall())
    return found


def release(odb: OrchestratorDB, key: str) -> None:
    """Undo the count of a delivery that ended in a handled error (not a crash)."""
    try:
        with odb.write():
            (TaskReceiptRow.update(deliveries=TaskReceiptRow.deliveries - 1)
             .where(TaskReceiptRow.key == key, TaskReceiptRow.deliveries > 0,
                    TaskReceiptRow.status.not_in(list(FINAL))).execute())
    except StorageError as exc:
        logger.warning("could not release delivery of %s: %s", key, exc)


def finish(key: str, status: str, result: dict[str, Any]) -> None:
    """Store the outcome of ``key``; call inside the transaction that wrote the data."""
    now = format_ts(utc_now())
    text = json.dumps(result)
    updated = run("UPDATE task_receipts SET status = ?, result = ?, updated_at = ? "
                  "WHERE key = ?", (status, text, now, key)).rowcount
    if not updated:
        run("INSERT INTO task_receipts (key, task, status, result, deliveries, "
            "first_seen_at, updated_at) VALUES (?, ?, ?, ?, 1, ?, ?)",
            (key, result.get("task", "?"), status, text, now, now))


def complete(odb: OrchestratorDB, key: str, result: dict[str, Any]) -> None:
    """Mark ``key`` done with ``result`` in a transaction of its own, unless its task
    already did (in the transaction of its data): the first final outcome stands."""
    if status(odb, key) in FINAL:  # a read: no write lock, no commit
        return
    with odb.write():
        if status_in_transaction(key) not in FINAL:
            finish(key, DONE, result)


def reject(odb: OrchestratorDB, key: str, result: dict[str, Any]) -> None:
    """Record that ``key`` was rejected (bad payload): a redelivery returns the same error."""
    with odb.write():
        finish(key, REJECTED, result)


def status_in_transaction(key: str) -> str | None:
    """The status of ``key`` inside the caller's transaction (None: no receipt)."""
    row = run("SELECT status FROM task_receipts WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def final_result_in_transaction(key: str) -> dict[str, Any] | None:
    """The stored result of ``key`` when its receipt is final (inside the caller's
    transaction): a task that finds one has already happened and must change nothing."""
    row = run(_READ, (key,)).fetchone()
    if row is None or row[0] not in FINAL or not row[2]:
        return None
    return dict(json.loads(row[2]))


def status(odb: OrchestratorDB, key: str) -> str | None:
    """The status of ``key``'s receipt, or None when there is none."""
    with odb.read():
        return status_in_transaction(key)


def is_final(odb: OrchestratorDB, key: str) -> bool:
    """Whether ``key``'s receipt is final: one statement, without binding the table
    classes (a seventh of :func:`status`'s cost), for a poll that runs it often."""
    rows = odb.sql("SELECT status FROM task_receipts WHERE key = ?", (key,))
    return bool(rows) and rows[0][0] in FINAL


def final_keys(odb: OrchestratorDB, keys: Sequence[str]) -> set[str]:
    """Those of ``keys`` whose receipt is final; any number of keys (asked in chunks)."""
    found: set[str] = set()
    unique = sorted(set(keys))
    with odb.read():
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start:start + _CHUNK]
            found.update(row.key for row in TaskReceiptRow.select(TaskReceiptRow.key).where(
                TaskReceiptRow.key.in_(chunk), TaskReceiptRow.status.in_(sorted(FINAL))))
    return found


def started_since(odb: OrchestratorDB, tasks: Sequence[str], within_s: float, *,
                  besides: str = "") -> bool:
    """Whether a delivery of one of ``tasks`` began (or was counted again) within the
    last ``within_s`` seconds and has not finished; ``besides`` is left out."""
    cutoff = format_ts(utc_now() - timedelta(seconds=within_s))
    with odb.read():
        return TaskReceiptRow.select().where(
            TaskReceiptRow.task.in_(list(tasks)), TaskReceiptRow.status == STARTED,
            TaskReceiptRow.updated_at >= cutoff, TaskReceiptRow.key != besides).exists()


def remove_finished_before(odb: OrchestratorDB, cutoff: str) -> int:
    """Delete final receipts last updated before ``cutoff`` (a timestamp); returns how many."""
    with odb.write():
        return int(TaskReceiptRow.delete()
                   .where(TaskReceiptRow.updated_at < cutoff,
                          TaskReceiptRow.status.in_(sorted(FINAL))).execute())


def drop(key: str) -> None:
    """Forget ``key``'s receipt (inside a write transaction), so its task may run again."""
    TaskReceiptRow.delete().where(TaskReceiptRow.key == key).execute()


def count(odb: OrchestratorDB) -> int:
    with odb.read():
        return int(TaskReceiptRow.select().count())
