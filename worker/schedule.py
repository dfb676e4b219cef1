"""The beat schedule, built from settings."""

from __future__ import annotations

from typing import Any

from orchmem.config import Settings


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """Beat entries: one per job and shard, each at its configured interval."""
    return {}
