"""Maintenance: the beat fan-out and the per-orchestrator jobs it publishes.

Beat publishes one ``fanout`` per job and shard (``{"shard": n, "job": ...}``); the
worker of that shard lists the orchestrators it owns and publishes one task each onto
the same queue, behind any write already waiting. Jobs:

- ``reembed``: vectors missing or from another embedder (only where some are);
- ``ingest``: a scan (only where ingest is enabled and files are waiting);
- ``integrity``: ``quick_check``; a damaged database is quarantined and that
  orchestrator's memory disabled, the others go on;
- ``gc``: finished receipts past ``beat.receipt_retention_days``, ``PRAGMA optimize``,
  a WAL checkpoint (Celery results in Redis expire by themselves, ``result_ttl_s``);
- ``bulletin``: a fresh bulletin where memory changed since the last snapshot;
- ``backup``: a backup into ``memory/backups/`` and the retention (tasks/backups.py);
- ``reflect``: reflection where memory changed since the last one, or working.md is
  a day old (tasks/reflect.py);
- ``retention``: forget what ``memory.governance.retention`` says is too old
  (tasks/retention.py);
- ``outbox``: prune outbox entries whose receipt exists, re-publish the others once
  they are older than ``beat.outbox_republish_after_s`` (models/storage/delivery/outbox.py).
"""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta
from typing import Any

from celery import shared_task

from orchmem.config import MemoryCorrupt, MemoryNotFound, MemoryValidationError, OrchmemError
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.embedding.device import bulk_embedder
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.embedding.reembed import reembed_batch, remaining
from orchmem.models.reflection.stages import reflect_due
from orchmem.models.storage.db.database import (
    OrchestratorDB,
    known_orchestrators,
    optimize_and_checkpoint,
)
from orchmem.models.storage.db.integrity import integrity_problem
from orchmem.models.storage.delivery import receipts
from orchmem.models.storage.delivery.deadletters import release_dead_letter
from orchmem.models.storage.delivery.outbox import Outbox, prune_done
from orchmem.models.storage.memories.events import watermark
from orchmem.models.storage.search import fts
from orchmem.tasks.backups import BACKUP
from orchmem.tasks.base import MemoryTask
from orchmem.tasks.bulletin import BULLETIN
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.tasks.publish import envelope, follow_up_key, resend, send_envelope
from orchmem.tasks.reflect import REFLECT
from orchmem.tasks.retention import RETENTION

logger = logging.getLogger(__name__)

REEMBED = "orchmem.reembed"
#: A run stops after this long and publishes its continuation, so that no single task
#: approaches the visibility timeout and other tasks of the shard get their turn.
DEFAULT_BUDGET_S = 120.0


def _positive(payload: dict[str, Any], name: str, default: float, cap: float) -> float:
    value = payload.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= cap:
        raise MemoryValidationError(f"{name} must be a number in (0, {cap}], got {value!r}",
                                    [{"path": name, "message": "out of range"}])
    return float(value)


@shared_task(base=MemoryTask, bind=True, name=REEMBED, kind="reembed")
def reembed(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Embed memories whose vector is missing or from another embedder, in batches.

    Resumable: each batch commits on its own, and a run that exceeds its time budget
    (``budgetS``, default 120) publishes a continuation. Recall keeps answering
    throughout: from the vectors already moved, and from full text for the rest.
    Returns ``{"embedded", "remaining", "batches", "seconds", "embedder", "continued"}``.
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        budget = _positive(payload, "budgetS", DEFAULT_BUDGET_S, 3600)
        batch_size = int(_positive(payload, "batchSize",
                                   self.settings.embedding.batch_size, 4096))
        embedder = bulk_embedder(self.settings.embedding)
        started = time.monotonic()
        embedded = batches = 0
        while time.monotonic() - started < budget:
            done = reembed_batch(odb, embedder, batch_size)
            if done == 0:
                break
            embedded += done
            batches += 1
            left = remaining(odb, embedder.version)
            odb.log.write("reembed_progress", embedded=embedded, remaining=left,
                          embedder=embedder.version)
            logger.info("reembed %s: %d done, %d remaining", odb.orchestrator_id, embedded, left)
        left = remaining(odb, embedder.version)
        continued = None
        if left:
            follow = envelope(orchestrator_id, self.name, "reembed",
                              {**payload, "idempotencyKey": follow_up_key(key)})
            continued = send_envelope(self.app, follow).id
        result = {"ok": True, "task": self.name, "orchestratorId": orchestrator_id,
                  "idempotencyKey": key, "embedded": embedded, "remaining": left,
                  "batches": batches, "embedder": embedder.version,
                  "seconds": round(time.monotonic() - started, 3), "continued": continued}
        odb.log.write("reembed", **{k: v for k, v in result.items() if k != "ok"})
        return result

    return self.pipeline(orchestrator_id, payload, body)


FANOUT = "orchmem.fanout"
INTEGRITY = "orchmem.integrity_check"
GC = "orchmem.gc"
OUTBOX = "orchmem.outbox_reconcile"
DEADLETTER_RETRY = "orchmem.deadletter_retry"
JOBS = ("reembed", "ingest", "integrity", "gc", "bulletin", "outbox", "backup", "reflect",
        "retention")


def _queue_of(task: MemoryTask, kwargs: dict[str, Any]) -> str:
    return str(task.app.amqp.router.route({}, FANOUT, (), kwargs)["queue"].name)


def _due(task: MemoryTask, job: str, orchestrator_id: str) -> bool:
    """Whether ``job`` has anything to do for this orchestrator (cheap checks only)."""
    memory = task.settings.memory_for(orchestrator_id)
    if not memory.enabled:
        return False
    workspace = task.databases.workspace(orchestrator_id)
    if job == "ingest":
        return memory.ingest.enabled and workspace.ingest_dir.is_dir() and any(
            entry.is_file() for entry in workspace.ingest_dir.iterdir())
    if job in ("integrity", "gc", "backup"):
        return workspace.db_path.exists()
    if job == "retention":  # the retention rules (tasks/retention.py)
        return memory.governance.retention_enabled and workspace.db_path.exists()
    if job == "outbox":
        return workspace.outbox_path.exists()
    odb = task.databases.open(orchestrator_id, create=False)
    if odb is None:
        return False
    if job == "reembed":
        return remaining(odb, get_embedder(task.settings.embedding).version) > 0
    if job == "reflect":
        return reflect_due(odb, utc_now())
    snapshot = workspace.bulletins_dir / "latest.json"
    try:
        seen = json.loads(snapshot.read_text(encoding="utf-8")).get("watermark")
    except (OSError, ValueError):
        seen = None
    return str(seen) != str(watermark(odb))


@shared_task(base=MemoryTask, bind=True, name=FANOUT)
def fanout(self: MemoryTask, shard: int, job: str) -> dict[str, Any]:
    """Publish ``job`` for every orchestrator of ``shard`` that needs it (beat's entry)."""
    if job not in JOBS:
        raise MemoryValidationError(f"job must be one of {', '.join(JOBS)}, got {job!r}")
    names = {"reembed": REEMBED, "ingest": INGEST_SCAN, "integrity": INTEGRITY, "gc": GC,
             "bulletin": BULLETIN, "outbox": OUTBOX, "backup": BACKUP, "reflect": REFLECT,
             "retention": RETENTION}
    mine = _queue_of(self, {"shard": shard})
    stamp = format_ts(utc_now())
    published, skipped = [], {}
    for orchestrator_id in known_orchestrators(self.settings):
        if _queue_of(self, {"orchestrator_id": orchestrator_id}) != mine:
            continue
        try:
            due = _due(self, job, orchestrator_id)
        except OrchmemError as exc:
            skipped[orchestrator_id] = exc.code
            continue
        if not due:
            continue
        send_envelope(self.app, envelope(orchestrator_id, names[job], job,
                                         {"idempotencyKey": f"{job}-beat-{stamp}"}))
        published.append(orchestrator_id)
    logger.info("fanout %s shard %s: %d published, %d skipped", job, shard, len(published),
                len(skipped))
    return {"ok": True, "job": job, "shard": shard, "published": published,
            "skipped": skipped}


@shared_task(base=MemoryTask, bind=True, name=INTEGRITY, kind="integrity",
             tracked=False)
def integrity_check(self: MemoryTask, orchestrator_id: str,
                    payload: dict[str, Any]) -> dict[str, Any]:
    """``quick_check`` one database; a damaged one is quarantined and disabled (raises
    MemoryCorrupt). Returns ``{"ok", "status": "ok", "seconds"}``."""

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        started = time.monotonic()
        problem = integrity_problem(odb)
        if problem is not None:
            folder = self.disable(orchestrator_id, problem)
            raise MemoryCorrupt(f"memory.db of {orchestrator_id!r} failed its integrity "
                                f"check: {problem}; moved to {folder}, memory disabled")
        result = {"ok": True, "task": self.name, "orchestratorId": orchestrator_id,
                  "status": "ok", "seconds": round(time.monotonic() - started, 3)}
        odb.log.write("integrity_check", status="ok", seconds=result["seconds"])
        return result

    return self.pipeline(orchestrator_id, payload, body)


@shared_task(base=MemoryTask, bind=True, name=GC, kind="gc", tracked=False)
def gc(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Drop finished receipts older than the retention, merge the full-text index,
    optimize, checkpoint the WAL."""

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        days = self.settings.beat.receipt_retention_days
        cutoff = format_ts(utc_now() - timedelta(days=days))
        removed = receipts.remove_finished_before(odb, cutoff)
        segments = fts.merge_segments(odb)
        checkpoint = optimize_and_checkpoint(odb)
        result = {"ok": True, "task": self.name, "orchestratorId": orchestrator_id,
                  "receiptsRemoved": removed, "textSegmentsMerged": segments,
                  "walCheckpoint": list(checkpoint)}
        odb.log.write("gc", receiptsRemoved=removed, retentionDays=days,
                      textSegmentsMerged=segments)
        return result

    return self.pipeline(orchestrator_id, payload, body)


@shared_task(base=MemoryTask, bind=True, name=OUTBOX, kind="outbox", tracked=False)
def outbox_reconcile(self: MemoryTask, orchestrator_id: str,
                     payload: dict[str, Any]) -> dict[str, Any]:
    """Prune outbox entries that have a final receipt; re-publish the overdue others.

    Returns ``{"pruned", "republished", "pending"}`` (counts).
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        outbox = Outbox(odb.workspace.outbox_path, self.settings.worker.busy_timeout_ms)
        try:
            total = len(outbox.keys())
            pending = len(prune_done(outbox, odb))
            pruned = total - pending
            republished = 0
            for entry in outbox.due(self.settings.beat.outbox_republish_after_s):
                send_envelope(self.app, resend(orchestrator_id, entry.task, entry.payload))
                outbox.mark_published(entry.key)
                republished += 1
        finally:
            outbox.close()
        result = {"ok": True, "task": self.name, "orchestratorId": orchestrator_id,
                  "pruned": pruned, "republished": republished, "pending": pending}
        if pruned or republished:
            odb.log.write("outbox_reconcile", pruned=pruned, republished=republished,
                          pending=pending)
        return result

    return self.pipeline(orchestrator_id, payload, body)


@shared_task(base=MemoryTask, bind=True, name=DEADLETTER_RETRY, kind="dlretry",
             tracked=False)
def deadletter_retry(self: MemoryTask, orchestrator_id: str,
                     payload: dict[str, Any]) -> dict[str, Any]:
    """Give a dead-lettered task (``payload["key"]``) another chance: release it and
    publish it again with its original payload. Raises MemoryNotFound if there is none."""

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        target = payload.get("key")
        if not isinstance(target, str):
            raise MemoryValidationError("key: the dead letter's idempotency key is required",
                                        [{"path": "key", "message": "required"}])
        released = release_dead_letter(odb, target)
        if released is None:
            raise MemoryNotFound(f"no dead letter with key {target!r} for {orchestrator_id!r}")
        original = released["payload"]
        sent = send_envelope(self.app, resend(orchestrator_id, released["task"],
                                              original["payload"]))
        odb.log.write("dead_letter_retry", key=target, task=released["task"], taskId=sent.id)
        return {"ok": True, "task": self.name, "orchestratorId": orchestrator_id,
                "retried": target, "retryTaskId": sent.id}

    return self.pipeline(orchestrator_id, payload, body)
