"""What a bulletin is composed from: active memories and unresolved conflicts, as values.

``storage.bulletin_reads.facts`` reads them in one snapshot; ``bulletin.compose`` packs
them. Kept apart from both so the storage layer can return them without importing the
packing code, and the packing code can be tested on hand-made values.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    """One active memory as the bulletin sees it."""

    memory_id: str
    type: str
    summary: str
    importance: int
    confidence: float
    created_at: str


@dataclass(frozen=True)
class Conflict:
    """An unresolved contradiction (see :mod:`orchmem.models.core.contradictions`)."""

    newer: Item
    older: Item


@dataclass(frozen=True)
class Facts:
    """Everything the bulletin is composed from."""

    orchestrator_id: str
    items: tuple[Item, ...]
    conflicts: tuple[Conflict, ...]
    watermark: int
