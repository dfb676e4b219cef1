"""When a ``Contradicts`` edge still stands: the one definition of "unresolved".

A contradiction never deletes either memory, and it is resolved only explicitly, by a
status change of either end (docs/architecture.md#contradictions). So it is
**unresolved while both of its memories are active**, and only then does recall lower
a score for it. A hard-forgotten memory is retracted, so a contradiction with a
forgotten end is resolved too.

Recall penalizes the older (``to``) end of each unresolved edge; the bulletin lists
each unresolved edge under ``conflicts_and_uncertainties``. Both use :func:`unresolved`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orchmem.models.core.shapes import Status


@dataclass(frozen=True)
class Contradiction:
    """A ``Contradicts`` edge: ``newer`` (its from end) contradicts ``older`` (its to end)."""

    edge_id: str
    newer_id: str
    older_id: str
    newer_status: Status
    older_status: Status


def unresolved(contradiction: Contradiction) -> bool:
    """True while neither end was superseded, retracted or forgotten (both are active)."""
    return (contradiction.newer_status is Status.ACTIVE
            and contradiction.older_status is Status.ACTIVE)


def contradicted(contradictions: Iterable[Contradiction]) -> set[str]:
    """The memoryIds on the older end of an unresolved contradiction (those recall penalizes)."""
    return {c.older_id for c in contradictions if unresolved(c)}
