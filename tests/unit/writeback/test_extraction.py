"""The rules-first extractor: precise on transcripts, structural on documents."""

from __future__ import annotations

import re
from pathlib import Path

import fake_llm_extractor
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from orchmem_testing import finishes_within

from orchmem.config import ExtractionBudgetExceeded, MemoryValidationError
from orchmem.config.memory_settings import IngestSettings
from orchmem.models.core.payloads import WritebackRequest
from orchmem.models.core.shapes import MemoryInput, MemoryType, validate
from orchmem.models.workspace.folders import Workspace
from orchmem.models.writeback.extraction import (
    MAX_SENTENCE_CHARS,
    RUN_OVERHEAD_CHARS,
    ExtractionBudget,
    Message,
    classify,
    extract_document,
    heading_title,
    load_extractor,
    rules_extractor,
    subject_of,
)
from orchmem.models.writeback.extraction_rules import RULES
from orchmem.models.writeback.proposals import build
from orchmem.models.writeback.reconcile import Proposed


@pytest.mark.parametrize(("text", "expected", "subject"), [
    ("I prefer tea over coffee", "Preference", "prefer"),
    ("Hi! My name is Sam Carter.", "Identity", "identity:name"),
    ("I live in Lisbon now", "Identity", "identity:location"),
    ("We decided to use Postgres for billing", "Decision", "decision"),
    ("My goal is to run a marathon in 2026", "Goal", None),
    ("Remind me to call the dentist on Monday", "Todo", None),
    ("The deadline is Friday", "Fact", "fact:deadline"),
    ("I went to a pottery class yesterday", "Event", None),
    ("my favorite color is green", "Preference", "favorite:color"),
    ("I don't like coffee anymore", "Preference", "like:coffee"),
])
def test_user_statements_become_typed_memories(text: str, expected: str,
                                               subject: str | None) -> None:
    candidate = classify(text, stated=True)
    assert candidate is not None
    assert (candidate.type.value, candidate.subject) == (expected, subject)
    assert candidate.stated and candidate.confidence == 0.9


@pytest.mark.parametrize("text", [
    "what's my name?", "Can you summarize the thread", "thanks!", "ok", "I need to go now",
    "I want to know the weather", "Could you remind me what we decided?", "I think so",
    "hello there", "Please explain the error",
])
def test_questions_requests_and_chatter_are_not_memories(text: str) -> None:
    assert classify(text, stated=True) is None


def test_hedged_statements_are_kept_with_low_confidence_and_as_inferred() -> None:
    candidate = classify("maybe we decided to use Redis", stated=True)
    assert candidate is not None
    assert candidate.confidence == 0.55 and candidate.stated is False


#: Preferences of someone named at the start, or of no one (a note's "Prefers tea"), with
#: their subject: the user's own ("prefer"), another person's ("prefer:<who>"), or none for
#: likes and dislikes. The held-out ones were written before the rules and not tuned on.
THIRD_PERSON = [("The customer prefers email over phone calls.", "prefer:customer"),
                ("The user prefers green tea to coffee", "prefer"),
                ("Prefers tea", "prefer")]
THIRD_PERSON_HELD_OUT = [("My manager prefers short status updates.", "prefer:manager"),
                         ("The client likes weekly summaries by email.", None),
                         ("Sarah prefers morning meetings.", "prefer:sarah"),
                         ("Our CEO hates long slide decks.", None),
                         ("The team would rather use Slack than email.", "prefer:team"),
                         ("Likes spicy food", None),
                         ("She really prefers aisle seats.", "prefer:she"),
                         ("Mark prefers tabs over spaces.", "prefer:mark"),
                         ("His wife loves gardening.", None),
                         ("Prefers concise answers without emojis", "prefer")]
NOT_PREFERENCES_HELD_OUT = ["The customer called about a refund.",
                            "The user asked for the invoice again.",
                            "The customer asked whether we ship to Canada."]


@pytest.mark.parametrize(("text", "subject"), THIRD_PERSON + THIRD_PERSON_HELD_OUT)
def test_someone_elses_preference_is_a_preference(text: str, subject: str | None) -> None:
    found = classify(text, stated=True)
    assert found is not None and found.type == MemoryType.PREFERENCE
    assert found.subject == subject
    [from_document] = extract_document(text)
    assert from_document.type == MemoryType.PREFERENCE


@pytest.mark.parametrize("text", NOT_PREFERENCES_HELD_OUT)
def test_what_someone_else_did_is_no_preference(text: str) -> None:
    found = classify(text, stated=True)
    assert found is None or found.type != MemoryType.PREFERENCE


def test_only_user_messages_are_extracted() -> None:
    messages = [Message("user", "I prefer window seats."),
                Message("assistant", "Great, I've noted that you prefer window seats."),
                Message("assistant", "We decided to use Postgres."),
                Message("system", "My name is Bot.")]
    out = rules_extractor(messages, "transcript")
    assert [(c.type.value, c.content) for c in out] == [("Preference", "I prefer window seats.")]


def test_like_and_dislike_share_a_subject_with_opposite_values() -> None:
    like = classify("I love coffee", stated=True)
    dislike = classify("I don't like coffee anymore", stated=True)
    assert like and dislike and like.subject == dislike.subject == "like:coffee"
    assert (like.value, dislike.value) == ("like", "dislike")


def test_document_headings_markers_and_paragraphs() -> None:
    text = """# Project Alpha
This document describes the billing rewrite and its scope for the team.

## Decisions
- Use SQLite per tenant
- Deploy on Tuesdays only

## Next steps
- [ ] write the migration guide
- [x] set up CI
1. book the design review

Goal: reach 100 paying users by June.
TODO: rotate the API keys
"""
    got = [(c.type.value, c.content) for c in extract_document(text)]
    assert got == [
        ("Observation", "This document describes the billing rewrite and its scope for the team."),
        ("Decision", "Use SQLite per tenant"),
        ("Decision", "Deploy on Tuesdays only"),
        ("Todo", "write the migration guide"),
        ("Event", "Done: set up CI"),
        ("Todo", "book the design review"),
        ("Goal", "Goal: reach 100 paying users by June."),
        ("Todo", "TODO: rotate the API keys"),
    ]


def test_a_plugged_in_extractor_replaces_the_rules(tmp_path: Path) -> None:
    extractor = load_extractor("fake_llm_extractor:extract")
    workspace = Workspace("o", tmp_path)
    request = validate(WritebackRequest, {"channelTranscript": {
        "conversationId": "c1", "messages": [{"role": "user", "text": "I am fond of jazz."}]}})
    proposals = build(request, extractor, workspace, 8000)
    [item] = proposals.items
    assert item.memory.content == "Likes jazz" and item.memory.importance == 61
    assert item.memory.source.conversation_id == "c1"
    assert fake_llm_extractor.CALLS[-1] == (1, "transcript")


@pytest.mark.parametrize("spec", ["no.such.module:extract", "fake_llm_extractor:missing",
                                  "fake_llm_extractor:CALLS"])
def test_a_bad_extractor_setting_is_a_clear_error(spec: str) -> None:
    with pytest.raises(MemoryValidationError, match="extractor"):
        load_extractor(spec)


def test_near_duplicates_need_the_same_numbers_and_most_words() -> None:
    from orchmem.models.writeback.reconcile import same_gist

    assert same_gist("I prefer aisle seats.", "I really prefer aisle seats!")
    assert not same_gist("The door code is 8082", "The door code is 3468")
    assert not same_gist("Valid fact 48: the green eel", "Valid fact 38: the blue owl")
    assert not same_gist("Meet Anna at noon", "Call Bob about the invoice tomorrow")


# ---------------------------------------------------------------------------- linear work

#: Characters of the long inputs below. Rules quadratic in the length take 24 s on a
#: 12,000-character list item (hours at this size); linear extraction takes
#: milliseconds.
LONG = 200_000
#: A bound far above the milliseconds linear extraction takes, far below the hours of
#: the quadratic rules: it catches pathological slowness, it does not measure speed.
GUARD_S = 20


def _repeated(unit: str, prefix: str = "") -> str:
    return prefix + unit * (LONG // len(unit))


#: name -> (a long hostile document, the type of its first candidate or None).
HOSTILE = {
    "list_item": (_repeated("x ", "- I "), MemoryType.OBSERVATION),
    "favourite_keyword": (_repeated("x is my favorite ", "- "), MemoryType.PREFERENCE),
    "final_keyword": (_repeated("that's final ", "- "), MemoryType.DECISION),
    "final_near_miss": (_repeated("that's finally ", "- "), MemoryType.OBSERVATION),
    "past_time_and_verb": (_repeated("yesterday went ", "- "), MemoryType.EVENT),
    "past_time_only": (_repeated("yesterday x ", "- "), MemoryType.OBSERVATION),
    "paragraph": (_repeated("x ", "I "), MemoryType.OBSERVATION),
    "heading_spaces": ("# a" + " " * LONG + "b", None),
    "heading_hashes": ("# a" + "#" * LONG + "b", None),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_long_hostile_line_is_read_a_few_times_not_once_per_position(name: str) -> None:
    text, first_type = HOSTILE[name]
    budget = ExtractionBudget()
    with finishes_within(GUARD_S, f"extract_document on {name}"):
        candidates = extract_document(text, budget)
    assert (candidates[0].type if candidates else None) == first_type
    # The line patterns read every character a few times; the rules read one capped view.
    capped = (len(RULES) + 4 + 8) * (MAX_SENTENCE_CHARS + RUN_OVERHEAD_CHARS)
    assert budget.spent <= 4 * (len(text) + RUN_OVERHEAD_CHARS) + capped


def test_a_long_list_item_is_classified_by_its_first_600_characters() -> None:
    late = "x " * MAX_SENTENCE_CHARS + "we decided to use Postgres"
    assert [(c.type, c.content) for c in extract_document("- " + late)] == [
        (MemoryType.OBSERVATION, late)]
    early = "we decided to use Postgres " + "x " * MAX_SENTENCE_CHARS
    assert [(c.type, c.content) for c in extract_document("- " + early)] == [
        (MemoryType.DECISION, early.strip())]


def test_subject_of_reads_the_first_600_characters_of_a_memory() -> None:
    statement = "my favorite color is green"
    assert subject_of(MemoryType.PREFERENCE, statement) == ("favorite:color", "green")
    assert subject_of(MemoryType.PREFERENCE, "x " * MAX_SENTENCE_CHARS + statement) == (
        None, None)
    with finishes_within(GUARD_S, "subject_of on a long memory"):
        assert subject_of(MemoryType.FACT, _repeated("x ", "I ")) == (None, None)


def test_an_explicit_memory_takes_its_subject_from_its_first_600_characters() -> None:
    def explicit(content: str) -> Proposed:
        memory = validate(MemoryInput, {"type": "Preference", "content": content,
                                        "source": {"sourceType": "manual", "capturedBy": "user"}},
                          max_content_chars=2 * LONG)
        return Proposed.explicit(memory)

    assert explicit("My favorite color is green").subject == "favorite:color"
    with finishes_within(GUARD_S, "Proposed.explicit on a long memory"):
        late = explicit(_repeated("x ", "I ") + " My favorite color is green")
    assert (late.subject, late.value) == (None, None)


# ---------------------------------------------------------------------------- same results

#: Pieces of text the rewritten rules react to, and some they must not.
PIECES = ["that's final", ", that's final", "THAT'S FINAL", "thats final", "that's finally",
          " is my favorite", " is my all-time favourite", " is my favourites", "yesterday",
          "last week", "2 days ago", "went", "worked", "passed away", "I ", "x", " ", "  ",
          ",", ".", "\n", "#", "- ", "\t", "é", "Dana", "the ", "our ", "my ", "deadline",
          "email address", " for x", " is ", " was ", " ends on ", " runs on ", " is hosted at ",
          " is due for ", " are about $5", "3", "I am a ", "I'm the ", "engineer", "managers"]


@settings(max_examples=500, deadline=None, database=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=2), max_size=30).map("".join))
def test_each_rule_finds_exactly_what_a_search_of_its_pattern_finds(text: str) -> None:
    for rule in RULES:
        expected, found = rule.pattern.search(text), rule.find(text)
        assert (found and (found.span(), found.groupdict())) == (
            expected and (expected.span(), expected.groupdict())), rule.pattern.pattern


@settings(max_examples=500, deadline=None, database=None)
@given(st.text(alphabet=" \t\u00a0\u2003#ab", min_size=1, max_size=30))
def test_a_heading_title_is_what_the_lazy_heading_pattern_captured(text: str) -> None:
    lazy = re.fullmatch(r"(?P<t>.+?)\s*#*", text)
    assert lazy is not None and heading_title(text) == lazy.group("t")


# ---------------------------------------------------------------------------- budget

PROSE = "We shipped the billing rewrite last week. The team liked it. " * 200


def test_the_budget_counts_the_same_work_for_the_same_text_and_stops_past_it() -> None:
    first, second = ExtractionBudget(), ExtractionBudget()
    assert extract_document(PROSE, first) == extract_document(PROSE, second)
    assert first.spent == second.spent > len(PROSE)
    assert extract_document(PROSE, ExtractionBudget(max_chars=first.spent))
    with pytest.raises(ExtractionBudgetExceeded, match="budget of"):
        extract_document(PROSE, ExtractionBudget(max_chars=first.spent - 1))


def test_the_time_backstop_stops_an_extraction_that_runs_too_long() -> None:
    with pytest.raises(ExtractionBudgetExceeded, match="ran longer"):
        extract_document(PROSE * 10, ExtractionBudget(max_s=0.001))


#: Short texts that cost the most work per character: a sentence or list item of three
#: characters (below three, a sentence is not classified), one per line or per space.
COSTLY = ["Ab.\n", "Ab. ", "Abc.\n", "I x. ", "- abc\n", "1. abc\n", "# a\n"]


def test_the_default_budget_admits_any_file_within_the_default_size_limit() -> None:
    defaults = IngestSettings()
    largest = defaults.max_file_size_mb * 1024 * 1024
    per_char = {}
    for unit in COSTLY:
        sample = unit * (20_000 // len(unit))
        budget = ExtractionBudget()
        extract_document(sample, budget)
        per_char[unit] = budget.spent / len(sample)
    assert max(per_char, key=per_char.__getitem__) == "Ab.\n"
    assert max(per_char.values()) * largest <= defaults.extraction_budget_chars
