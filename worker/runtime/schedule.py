"""The beat schedule, built from settings: one entry per maintenance job and shard."""

from __future__ import annotations

from typing import Any

from orchmem.config import Settings
from orchmem.tasks.maintenance import FANOUT
from orchmem.worker.runtime.shards import control_queue_name


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """``{name: {"task", "schedule" (seconds), "kwargs", "options"}}`` for Celery beat.

    Each entry publishes a fan-out to one shard's queue; that shard's worker publishes
    the job for each orchestrator it owns that needs it.
    """
    beat = settings.beat
    intervals = {
        "reembed": beat.reembed_interval_s,
        "ingest": beat.ingest_scan_interval_s,
        "integrity": beat.integrity_check_interval_s,
        "gc": beat.gc_interval_s,
        "bulletin": beat.bulletin_refresh_interval_s,
        "outbox": beat.outbox_reconcile_interval_s,
        "backup": settings.backup.interval_s,
        "reflect": beat.reflect_interval_s,
        "retention": settings.memory.governance.retention_interval_s,
    }
    schedule = {}
    for job, every in intervals.items():
        if every <= 0:
            continue  # switched off (backup.interval_s = 0)
        for shard in range(settings.shards):
            queue = control_queue_name(settings, shard)
            schedule[f"{job}-shard{shard}"] = {
                "task": FANOUT,
                "schedule": float(every),
                "kwargs": {"shard": shard, "job": job},
                # A run missed while beat was down is not worth running late twice.
                "options": {"queue": queue, "routing_key": queue, "expires": float(every)},
            }
    return schedule
