"""Opposite and restating preferences (models/core/preferences.py)."""

from __future__ import annotations

import pytest

from orchmem.models.core.preferences import Sides, opposite, restates, sides

#: (older, newer) pairs of preferences of one person that say opposite things. The first
#: come from a new user's session; the held-out ones were written before the rules and
#: not tuned on.
OPPOSITE = [("I prefer coffee to tea", "Prefers tea"),
            ("The user prefers green tea to coffee", "I prefer coffee to tea"),
            ("I prefer tea to coffee", "I prefer coffee to tea")]
OPPOSITE_HELD_OUT = [("I prefer email over phone calls.", "Prefers phone calls"),
                     ("I prefer dark mode to light mode.",
                      "The user prefers light mode over dark mode."),
                     ("I prefer aisle seats to window seats.", "Prefers window seats"),
                     ("My manager prefers Slack to email.", "My manager prefers email over Slack.")]
#: Pairs that agree or are about other things.
NOT_OPPOSITE = [("I prefer tea to coffee", "Prefers tea"),
                ("I prefer tea to coffee", "Prefers window seats")]
NOT_OPPOSITE_HELD_OUT = [("I prefer email over phone calls.", "Prefers email"),
                         ("I prefer dark mode to light mode.", "Prefers window seats"),
                         ("I prefer tea over coffee.", "I really prefer tea.")]


def test_sides_are_what_is_preferred_and_what_it_is_preferred_to() -> None:
    assert sides("I prefer coffee to tea") == Sides(frozenset({"coffee"}), frozenset({"tea"}))
    assert sides("Prefers green tea") == Sides(frozenset({"green", "tea"}), frozenset())
    assert sides("I'd rather take the train than fly") == Sides(frozenset({"train"}),
                                                                frozenset({"fly"}))
    assert sides("I like tea") is None
    assert sides("I prefer to work from home") is None


@pytest.mark.parametrize(("older", "newer"), OPPOSITE + OPPOSITE_HELD_OUT)
def test_opposite_preferences_are_told_apart_both_ways(older: str, newer: str) -> None:
    assert opposite(newer, older) and opposite(older, newer)
    assert not restates(newer, older)


@pytest.mark.parametrize(("older", "newer"), NOT_OPPOSITE + NOT_OPPOSITE_HELD_OUT)
def test_agreeing_or_unrelated_preferences_are_not_opposite(older: str, newer: str) -> None:
    assert not opposite(newer, older)


def test_a_preference_restates_an_older_one_only_when_it_adds_nothing() -> None:
    assert restates("Prefers email", "I prefer email over phone calls.")
    assert restates("I really prefer tea.", "I prefer tea over coffee.")
    assert not restates("I prefer tea to juice", "I prefer tea to coffee")
    assert not restates("Prefers window seats", "I prefer tea to coffee")


def test_only_the_head_of_a_huge_memory_is_read() -> None:
    assert sides("x " * 10_000 + "I prefer tea to coffee") is None
