"""The rules-first extractor: precise on transcripts, structural on documents."""

from __future__ import annotations

from pathlib import Path

import fake_llm_extractor
import pytest

from orchmem.config import MemoryValidationError
from orchmem.models.extraction import (
    Message,
    classify,
    extract_document,
    load_extractor,
    rules_extractor,
)
from orchmem.models.payloads import WritebackRequest
from orchmem.models.proposals import build
from orchmem.models.schema import validate
from orchmem.models.workspace import Workspace


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
    from orchmem.models.reconcile import same_gist

    assert same_gist("I prefer aisle seats.", "I really prefer aisle seats!")
    assert not same_gist("The door code is 8082", "The door code is 3468")
    assert not same_gist("Valid fact 48: the green eel", "Valid fact 38: the blue owl")
    assert not same_gist("Meet Anna at noon", "Call Bob about the invoice tomorrow")
