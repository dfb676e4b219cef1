"""The receipt of one task: idempotency key -> delivery count, status, result.

A receipt is ``started`` from the first delivery (committed at once, so a delivery
that crashes its worker is counted too) and final (``done``, ``rejected`` or
``dead``) in the same transaction as the data the task wrote: a redelivered task
finds the final receipt and writes nothing. :mod:`orchmem.tasks.pipeline` drives
this protocol for every task; the client and the outbox read receipts only here.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from orchmem.config import StorageError

from ..schema import (
    format_ts,
    utc_now,
)
from .database import OrchestratorDB
from .tables import (
    TaskReceiptRow,
)

logger = logging.getLogger(__name__)

RECEIPT_STARTED = "started"


RECEIPT_DONE = "done"


RECEIPT_REJECTED = "rejected"


RECEIPT_DEAD = "dead"


FINAL_RECEIPTS = frozenset({RECEIPT_DONE, RECEIPT_REJECTED, RECEIPT_DEAD})


@dataclass(frozen=True)
class Delivery:
    """What the receipt table knew when a task was delivered."""

    key: str
    deliveries: int
    status: str
    result: dict[str, Any] | None

    @property
    def finished(self) -> bool:
        return self.status in FINAL_RECEIPTS


def record_delivery(odb: OrchestratorDB, key: str, task: str) -> Delivery:
    """Count one more delivery of ``key`` (committed at once, so crashes are counted too)."""
    now = format_ts(utc_now())
    with odb.write():
        row = TaskReceiptRow.get_or_none(TaskReceiptRow.key == key)
        if row is None:
            row = TaskReceiptRow.create(key=key, task=task, status=RECEIPT_STARTED,
                                        deliveries=1, first_seen_at=now, updated_at=now)
        elif row.status not in FINAL_RECEIPTS:
            row.deliveries += 1
            row.updated_at = now
            row.save()
        result = json.loads(row.result) if row.result else None
        return Delivery(key=key, deliveries=row.deliveries, status=row.status, result=result)


def release_delivery(odb: OrchestratorDB, key: str) -> None:
    """Undo the count of a delivery that ended in a handled error (not a crash)."""
    try:
        with odb.write():
            (TaskReceiptRow.update(deliveries=TaskReceiptRow.deliveries - 1)
             .where(TaskReceiptRow.key == key, TaskReceiptRow.deliveries > 0,
                    TaskReceiptRow.status.not_in(list(FINAL_RECEIPTS))).execute())
    except StorageError as exc:
        logger.warning("could not release delivery of %s: %s", key, exc)


def finish_receipt(key: str, status: str, result: dict[str, Any]) -> None:
    """Store the outcome of ``key``; call inside the transaction that wrote the data."""
    now = format_ts(utc_now())
    updated = (TaskReceiptRow.update(status=status, result=json.dumps(result), updated_at=now)
               .where(TaskReceiptRow.key == key).execute())
    if not updated:
        TaskReceiptRow.create(key=key, task=result.get("task", "?"), status=status,
                              result=json.dumps(result), deliveries=1,
                              first_seen_at=now, updated_at=now)


def reject_task(odb: OrchestratorDB, key: str, result: dict[str, Any]) -> None:
    """Record that ``key`` was rejected (bad payload): a redelivery returns the same error."""
    with odb.write():
        finish_receipt(key, RECEIPT_REJECTED, result)
