"""The beat schedule's backup job: on each shard's control queue, off at interval 0."""

from __future__ import annotations

from orchmem.config import load_settings
from orchmem.tasks.backups import BACKUP
from orchmem.worker.runtime.schedule import beat_schedule
from orchmem.worker.runtime.shards import queue_for


def test_backups_are_scheduled_per_shard_on_the_control_queue() -> None:
    settings = load_settings(environ={}, shards=2, backup={"interval_s": 3600})
    schedule = beat_schedule(settings)
    for shard in (0, 1):
        entry = schedule[f"backup-shard{shard}"]
        assert entry["schedule"] == 3600 and entry["kwargs"] == {"shard": shard, "job": "backup"}
        assert entry["options"]["queue"] == f"memory.{shard}.control"
    assert queue_for(settings, "any-orch", BACKUP).endswith(".control")


def test_interval_zero_switches_scheduled_backups_off() -> None:
    settings = load_settings(environ={}, shards=2, backup={"interval_s": 0})
    assert not [name for name in beat_schedule(settings) if name.startswith("backup")]
