"""Which memories only ask or say almost nothing, and who said a memory."""

from __future__ import annotations

import pytest

from orchmem.models.language.speakers import MAX_NAMES, has_topic, named, speaker, without
from orchmem.models.language.substance import Kind, kind


@pytest.mark.parametrize(("content", "expected"), [
    ("Joanna: Wow, Nate, that looks awesome! What inspired you?", Kind.ASKS),
    ("Caroline: Cool! Got any fav tunes? [shares a photo of a guitar]", Kind.ASKS),
    ("Joanna: See ya Nate!", Kind.TERSE),
    ("Alright, see you tomorrow!", Kind.TERSE),
    ("Melanie: Yeah, I play clarinet! Started when I was young. [shares a photo of notes]",
     Kind.STATES),
    ("I'm allergic to shellfish.", Kind.STATES),
    ("The deploy failed: disk full", Kind.STATES),
    ("", Kind.TERSE),
])
def test_kind_reads_the_words_after_the_speaker_label(content: str, expected: Kind) -> None:
    assert kind(content) == expected


def test_a_long_memory_is_read_only_up_to_its_scan_limit() -> None:
    assert kind("Nate: " + "word " * 10_000 + "?") == Kind.STATES


@pytest.mark.parametrize(("query", "names"), [
    ("What is Joanna inspired by?", ("Joanna",)),
    ("When did Joanna plan on going to Nate's to watch?", ("Joanna", "Nate")),
    ("Joanna said what?", ()),
    ("what did we decide about the launch?", ()),
    ("Was it in May 2023 that Caroline moved?", ("May", "Caroline")),
])
def test_named_takes_the_capitalised_words_after_the_first(query: str,
                                                           names: tuple[str, ...]) -> None:
    assert named(query) == names


@pytest.mark.parametrize(("content", "who"), [
    ("Joanna: hi there", "Joanna"),
    ("Mary Ann Smith: the deploy is done", "Mary Ann Smith"),
    ("The deploy failed: disk full", None),
    ("no label here", None),
])
def test_speaker_is_the_capitalised_label_before_a_colon(content: str, who: str | None) -> None:
    assert speaker(content) == who


def test_without_drops_the_names_and_their_possessive() -> None:
    assert without("When did Joanna go to Nate's house?", ("Joanna", "Nate")) == \
        "When did go to house?"
    assert without("Natey and Nate", ("Nate",)) == "Natey and"


def test_a_question_gives_at_most_a_few_names() -> None:
    assert len(named("Who " + " ".join(f"Name{i}x" for i in range(100)))) == MAX_NAMES


@pytest.mark.parametrize(("text", "topic"), [
    ("What is inspired by?", True),
    ("Tell me about", False),
    ("Who is ?", False),
    ("", False),
    ("What recipes has shared?", True),
])
def test_has_topic_looks_past_function_and_request_words(text: str, topic: bool) -> None:
    assert has_topic(text) is topic
