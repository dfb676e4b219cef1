"""The router's rules: the kind of question, and the plan (window, expansion) it gets."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from orchmem.models.recall.router import Intent, classify, plan

NOW = datetime(2023, 5, 8, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("query", "intent"), [
    ("Have we seen this error before?", Intent.SIMILAR_CASE),
    ("Was there a similar problem with the deploy?", Intent.SIMILAR_CASE),
    ("When did Caroline go to the support group?", Intent.ENTITY_TIME),
    ("What did Melanie paint last week?", Intent.ENTITY_TIME),
    ("What did Melanie do in June?", Intent.ENTITY_TIME),
    ("How long ago did they move?", Intent.ENTITY_TIME),
    ("What happened at the launch?", Intent.WHAT_HAPPENED),
    ("What did Caroline do to relax?", Intent.WHAT_HAPPENED),
    ("What does the user prefer to drink?", Intent.PROFILE),
    ("What are Melanie's hobbies?", Intent.PROFILE),
    ("Who is the user's manager?", Intent.SEMANTIC),
    ("what is the user's name?", Intent.PROFILE),
    ("What is the customer called?", Intent.PROFILE),
    ("What is the name of the restaurant?", Intent.SEMANTIC),
    ("Which database does the team use?", Intent.SEMANTIC),
])
def test_classify(query: str, intent: Intent) -> None:
    assert classify(query) == intent


def test_a_dated_question_gets_its_window_and_a_boost() -> None:
    p = plan("What did we decide in March 2023?", NOW)
    assert p.intent == Intent.ENTITY_TIME
    assert p.window == (date(2023, 3, 1), date(2023, 3, 31))
    assert p.window_phrases == ("March 2023",)
    assert p.window_boost > 0
    assert p.dump()["window"] == ["2023-03-01", "2023-03-31"]


def test_relative_phrases_of_a_question_resolve_against_the_clock() -> None:
    assert plan("what happened last week?", NOW).window == (date(2023, 5, 1), date(2023, 5, 7))


def test_a_month_without_a_year_is_the_last_one_before_the_clock() -> None:
    assert plan("When did Melanie go camping in June?", NOW).window == (
        date(2022, 6, 1), date(2022, 6, 30))
    assert plan("What did she paint in April?", NOW).window == (
        date(2023, 4, 1), date(2023, 4, 30))


def test_a_question_without_a_date_has_no_window_and_no_boost() -> None:
    p = plan("When did Caroline move?", NOW)
    assert p.window is None and p.window_boost == 0.0
    assert p.dump()["window"] is None


@pytest.mark.parametrize("intent", list(Intent))
def test_every_plan_expands_a_few_hits(intent: Intent) -> None:
    queries = {Intent.SIMILAR_CASE: "a similar problem", Intent.ENTITY_TIME: "when",
               Intent.WHAT_HAPPENED: "what happened", Intent.PROFILE: "favourite food",
               Intent.SEMANTIC: "the database"}
    p = plan(queries[intent], NOW)
    assert p.intent == intent
    assert 0 < p.expand_hits <= 5 and 0 < p.expand_share < 1


def test_a_plan_carries_the_names_of_its_question_and_lowers_memories_that_ask() -> None:
    p = plan("What is Joanna inspired by?", NOW)
    assert p.names == ("Joanna",) and p.speaker_boost > 0 and p.speaker_labels > 0
    assert p.speakers == ()  # filled by recall, from the database's labels
    assert 0 < p.asks_factor < 1 and 0 < p.terse_factor < 1
    assert p.dump()["names"] == ["Joanna"]


def test_a_plan_favours_after_its_expansion() -> None:
    p = plan("What is Joanna inspired by?", NOW)
    assert p.favour_after_expansion and p.dump()["favourAfterExpansion"] is True


def test_only_a_question_with_a_window_gets_a_window_list() -> None:
    assert plan("Where did Joanna travel to in July 2022?", NOW).dated_hits > 0
    assert plan("Where did Joanna travel to?", NOW).dated_hits == 0


def test_a_plan_keeps_dated_memories_through_substance() -> None:
    # weigh_substance applies it only to a question about when (tests/unit/core/test_validity.py)
    p = plan("When did Caroline move?", NOW)
    assert p.dated_substance and p.dated_boost > 0
    assert p.dump()["datedSubstance"] is True
