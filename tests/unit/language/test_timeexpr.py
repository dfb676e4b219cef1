"""Relative and absolute dates in words, resolved by rules against an anchor."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from orchmem.models.language.timeexpr import MAX_SCAN_CHARS, resolve, window

#: Monday 8 May 2023, 13:56 UTC (a LoCoMo session date).
ANCHOR = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def days(text: str, anchor: datetime | date = ANCHOR) -> list[tuple[str, str, str]]:
    return [(r.text, r.start.isoformat(), r.end.isoformat()) for r in resolve(text, anchor)]


@pytest.mark.parametrize(("text", "start", "end"), [
    ("I went to a support group yesterday", "2023-05-07", "2023-05-07"),
    ("we ship today", "2023-05-08", "2023-05-08"),
    ("see you tomorrow", "2023-05-09", "2023-05-09"),
    ("last night was fun", "2023-05-07", "2023-05-07"),
    ("next Friday we ship", "2023-05-12", "2023-05-12"),
    ("last Friday we shipped", "2023-05-05", "2023-05-05"),
    ("next Monday", "2023-05-15", "2023-05-15"),  # the anchor is a Monday: a week on
    ("last Monday", "2023-05-01", "2023-05-01"),
    ("this Wednesday", "2023-05-10", "2023-05-10"),
    ("last week was rough", "2023-05-01", "2023-05-07"),
    ("this week", "2023-05-08", "2023-05-14"),
    ("next week", "2023-05-15", "2023-05-21"),
    ("last month", "2023-04-01", "2023-04-30"),
    ("next month", "2023-06-01", "2023-06-30"),
    ("last year", "2022-01-01", "2022-12-31"),
    ("last weekend I ran", "2023-05-06", "2023-05-07"),
    ("this weekend", "2023-05-13", "2023-05-14"),
    ("two days ago", "2023-05-06", "2023-05-06"),
    ("3 weeks ago", "2023-04-17", "2023-04-23"),
    ("a few months ago", "2023-02-01", "2023-02-28"),
    ("in 2 days", "2023-05-10", "2023-05-10"),
    ("in May 2023 we met", "2023-05-01", "2023-05-31"),
    ("in March, 2021", "2021-03-01", "2021-03-31"),
    ("on 8 May, 2023", "2023-05-08", "2023-05-08"),
    ("on the 3rd of June 2022", "2022-06-03", "2022-06-03"),
    ("July 14, 2022 was hot", "2022-07-14", "2022-07-14"),
    ("on 25 December", "2023-12-25", "2023-12-25"),  # no year: the anchor's
    ("2023-01-02 is the deadline", "2023-01-02", "2023-01-02"),
    ("since 2016 I paint", "2016-01-01", "2016-12-31"),
    ("we went camping two weekends ago", "2023-04-29", "2023-04-30"),
    ("a weekend ago", "2023-05-06", "2023-05-07"),  # the same as "last weekend"
    ("in 2 weekends", "2023-05-20", "2023-05-21"),
    ("I joined a new group last Tues", "2023-05-02", "2023-05-02"),
    ("next Thurs", "2023-05-11", "2023-05-11"),
])
def test_phrase_resolves_to_its_days(text: str, start: str, end: str) -> None:
    [(_, got_start, got_end)] = days(text)
    assert (got_start, got_end) == (start, end)


def test_month_across_a_year_boundary() -> None:
    assert days("last month", date(2024, 1, 15)) == [("last month", "2023-12-01", "2023-12-31")]
    assert days("next month", date(2023, 12, 31)) == [("next month", "2024-01-01", "2024-01-31")]


@pytest.mark.parametrize("text", [
    "", "I may go", "nothing dated here", "Friday", "on 31 February 2023", "2023-13-40",
    "may I ask", "the March of progress", "a weekly meeting", "in June", "last sat down",
])
def test_no_date_is_guessed(text: str) -> None:
    assert days(text) == []


def test_a_full_date_is_not_read_again_as_its_year() -> None:
    assert days("It was on 8 May 2023, in 2023 anyway") == [
        ("8 May 2023", "2023-05-08", "2023-05-08"), ("in 2023", "2023-01-01", "2023-12-31")]


def test_several_phrases_come_in_text_order_and_make_one_window() -> None:
    refs = resolve("yesterday I booked the trip for next month", ANCHOR)
    assert [r.text for r in refs] == ["yesterday", "next month"]
    assert window(refs) == (date(2023, 5, 7), date(2023, 6, 30))
    assert window([]) is None


def test_only_the_head_of_a_long_text_is_scanned() -> None:
    assert days("x " * MAX_SCAN_CHARS + "yesterday") == []


@pytest.mark.parametrize(("text", "start", "end"), [
    ("When did Melanie go camping in June?", "2022-06-01", "2022-06-30"),  # the last June
    ("What did she do in May?", "2023-05-01", "2023-05-31"),  # the anchor's own month
    ("during late January", "2023-01-01", "2023-01-31"),
    ("in June 2021", "2021-06-01", "2021-06-30"),  # a year given wins
    ("in June of 2021", "2021-06-01", "2021-06-30"),
])
def test_a_question_bare_month_is_the_last_one_begun(text: str, start: str, end: str) -> None:
    [ref] = resolve(text, ANCHOR, bare_months=True)
    assert (ref.start.isoformat(), ref.end.isoformat()) == (start, end)


def test_a_statement_bare_month_is_left_alone() -> None:
    """"We're moving in June" may be ahead or behind: only a question's is resolved."""
    assert days("We're moving in June") == []
    assert resolve("in June 3rd", ANCHOR, bare_months=True)[0].text == "June 3rd"
    assert resolve("What did they plant in Jan's garden?", ANCHOR, bare_months=True) == []


@pytest.mark.parametrize(("text", "day"), [
    ("What did we talk about on Tuesday?", "2023-05-02"),
    ("What was decided on Monday?", "2023-05-01"),  # the anchor's own weekday: a week back
    ("what happened on fri", "2023-05-05"),
])
def test_a_past_tense_question_bare_weekday_is_the_last_one_before(text: str, day: str) -> None:
    [ref] = resolve(text, ANCHOR, bare_months=True)
    assert (ref.start.isoformat(), ref.end.isoformat()) == (day, day)


@pytest.mark.parametrize("text", [
    "What is on Tuesday?",  # ahead or behind: left alone
    "What did we say on Tuesday's call?",  # a possessive names the call, not the day
])
def test_a_bare_weekday_not_asked_about_the_past_is_left_alone(text: str) -> None:
    assert resolve(text, ANCHOR, bare_months=True) == []
    assert days("We talked on Tuesday") == []  # a statement's weekday could be either
