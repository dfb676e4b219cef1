"""Which memory types a question asks about (models/intent.py)."""

from __future__ import annotations

import pytest

from orchmem.models.intent import favoured_types


@pytest.mark.parametrize(("query", "types"), [
    ("What did we decide about the help center launch?", {"Decision"}),
    ("Which option did the team agree on? What was the decision?", {"Decision"}),
    ("What does the user prefer for answers?", {"Preference"}),
    ("What is their favourite colour?", {"Preference"}),
    ("What is left to do for the launch?", {"Todo"}),
    ("Remind me what my goals are", {"Todo", "Goal"}),
    ("What is my name?", {"Identity"}),
    ("When is the deadline?", set()),
    ("zebra quantum submarine", set()),
    ("", set()),
])
def test_a_question_favours_the_types_it_names(query: str, types: set[str]) -> None:
    assert favoured_types(query) == types


def test_only_the_head_of_a_huge_query_is_read() -> None:
    assert favoured_types("x " * 10_000 + "what did we decide") == frozenset()
