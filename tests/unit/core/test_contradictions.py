""""Unresolved contradiction" has one definition, shared by recall and the bulletin."""

from __future__ import annotations

import itertools

import pytest

from orchmem.models.core.contradictions import Contradiction, contradicted, unresolved
from orchmem.models.core.shapes import Status


def edge(newer: Status, older: Status, n: int = 1) -> Contradiction:
    return Contradiction(edge_id=f"e-{n}", newer_id=f"new-{n}", older_id=f"old-{n}",
                         newer_status=newer, older_status=older)


def test_a_contradiction_stands_while_both_ends_are_active() -> None:
    assert unresolved(edge(Status.ACTIVE, Status.ACTIVE))


@pytest.mark.parametrize(("newer", "older"), [
    pair for pair in itertools.product(Status, Status)
    if pair != (Status.ACTIVE, Status.ACTIVE)])
def test_a_status_change_of_either_end_resolves_it(newer: Status, older: Status) -> None:
    assert not unresolved(edge(newer, older))


def test_only_the_older_end_of_a_standing_contradiction_is_penalized() -> None:
    edges = [edge(Status.ACTIVE, Status.ACTIVE, 1), edge(Status.RETRACTED, Status.ACTIVE, 2),
             edge(Status.ACTIVE, Status.SUPERSEDED, 3), edge(Status.ACTIVE, Status.ACTIVE, 4)]
    assert contradicted(edges) == {"old-1", "old-4"}
    assert contradicted([]) == set()
