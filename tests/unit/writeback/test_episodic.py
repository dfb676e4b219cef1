"""Episodic capture: the extractive summary of an exchange and its proposal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings

from orchmem.config import ConfigError
from orchmem.models.core.governance_fields import Tier
from orchmem.models.core.payloads import WritebackRequest
from orchmem.models.core.shapes import EdgeType, MemoryType, validate
from orchmem.models.workspace.folders import Workspace
from orchmem.models.writeback.episodic import ELLIPSIS, summarize_exchange
from orchmem.models.writeback.extraction import Message, rules_extractor
from orchmem.models.writeback.proposals import Proposals, build

EXCHANGE = [
    Message("user", "Hi there! I moved to Berlin on May 3. The flat is small. "
                    "I start at Siemens next Monday."),
    Message("assistant", "Congratulations! Berlin is lovely in spring. Do you need "
                         "tips for the commute?"),
    Message("tool", "lookup: weather Berlin 18C"),
    Message("user", "Thanks!"),
]


def test_the_summary_keeps_each_sides_first_line_and_its_details() -> None:
    text = summarize_exchange(EXCHANGE, 400)
    assert text == ("user: I moved to Berlin on May 3. I start at Siemens next Monday.\n"
                    "assistant: Berlin is lovely in spring.")


def test_labels_name_the_sides() -> None:
    text = summarize_exchange(EXCHANGE, 400, labels={"user": "Ana", "assistant": "Bot"})
    assert text is not None and text.startswith("Ana: I moved") and "\nBot: Berlin" in text


def test_the_summary_is_bounded_and_cut_at_a_word() -> None:
    long = [Message("user", "word " * 400), Message("assistant", "Another long answer " * 50)]
    text = summarize_exchange(long, 120)
    assert text is not None and len(text) <= 120
    user, assistant = text.split("\n")
    assert user.endswith(ELLIPSIS) and user[:-1].endswith("word")
    assert assistant.startswith("assistant: Another long answer")


def test_small_talk_alone_still_gives_its_first_sentence() -> None:
    text = summarize_exchange([Message("user", "Where is the Oslo office?"),
                               Message("assistant", "Sure! Great question.")], 200)
    assert text == "user: Where is the Oslo office?\nassistant: Sure!"


@pytest.mark.parametrize("messages", [
    [Message("user", "I moved to Berlin.")],
    [Message("assistant", "Hello!"), Message("system", "Be brief.")],
    [Message("user", "   "), Message("assistant", "Noted.")],
])
def test_no_exchange_no_summary(messages: list[Message]) -> None:
    assert summarize_exchange(messages, 200) is None


def _build(tmp_path: Path, payload: dict[str, Any], chars: int | None = 400) -> Proposals:
    workspace = Workspace("o", tmp_path)
    request = validate(WritebackRequest, payload, workspace=workspace)
    return build(request, rules_extractor, workspace, 8000, chars)


def _transcript(*messages: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {"channelTranscript": {"conversationId": "c1", **extra, "messages": [
        {"role": role, "text": text, "at": "2026-11-24T10:00:00Z"}
        for role, text in messages]}}


def test_capture_adds_one_episodic_summary_last_with_partof_edges(tmp_path: Path) -> None:
    payload = {**_transcript(("user", "My name is Sam Carter. I live in Lisbon now."),
                             ("assistant", "Nice to meet you, Sam."), scope="project",
                             projectId="p1"),
               "memories": [{"type": "Fact", "content": "The build uses Bazel.",
                             "source": {"sourceType": "manual", "capturedBy": "user"}}]}
    off = _build(tmp_path, payload, None)
    on = _build(tmp_path, payload)
    assert [p.memory.content for p in on.items[:-1]] == [p.memory.content for p in off.items]
    assert off.edges == [] and all(p.memory.key is None for p in off.items)
    summary = on.items[-1].memory
    assert summary.type == MemoryType.EVENT and summary.tier == Tier.EPISODIC
    assert summary.content == ("user: My name is Sam Carter. I live in Lisbon now.\n"
                               "assistant: Nice to meet you, Sam.")
    assert summary.source.conversation_id == "c1"
    assert summary.source.source_type.value == "channel_transcript"
    assert (summary.scope.value, summary.project_id) == ("project", "p1")
    assert summary.valid_from is not None and summary.valid_from.isoformat().startswith(
        "2026-11-24T10:00")
    statements = [p.memory for p in on.items[1:-1]]
    assert len(statements) == 2 and on.items[0].memory.key is None
    assert [(e.from_memory_id, e.to_memory_id, e.edge_type) for e in on.edges] == [
        (m.key, summary.key, EdgeType.PART_OF) for m in statements]
    assert on.edges_within(on.items[:-1]) == []  # the summary cut by a limit: no edges


def test_summary_keys_never_take_a_requests_own_key(tmp_path: Path) -> None:
    payload = {**_transcript(("user", "I live in Lisbon now."), ("assistant", "Noted.")),
               "memories": [{"type": "Fact", "content": "The build uses Bazel.",
                             "key": "_exchange.summary",
                             "source": {"sourceType": "manual", "capturedBy": "user"}}]}
    on = _build(tmp_path, payload)
    keys = [p.memory.key for p in on.items]
    assert keys == ["_exchange.summary", "__exchange.0", "__exchange.summary"]


def test_no_summary_that_only_restates_an_event_statement(tmp_path: Path) -> None:
    on = _build(tmp_path, _transcript(("user", "Yesterday I moved to Berlin."),
                                      ("assistant", "Ok.")))
    assert [p.memory.type for p in on.items] == [MemoryType.EVENT]
    assert on.edges == []


@pytest.mark.parametrize(("key", "value"), [("episodic_summary", "sometimes"),
                                            ("episodic_summary", [True]),
                                            ("episodic_summary_chars", 10)])
def test_a_bad_setting_is_refused_naming_it(tmp_path: Path, key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"memory.writeback.{key}"):
        make_settings(tmp_path, "", memory={"writeback": {key: value}})


def test_a_bad_override_for_one_orchestrator_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"orchestrators\.o1\.memory\.writeback\."
                                          r"episodic_summary"):
        make_settings(tmp_path, "", orchestrators={
            "o1": {"memory": {"writeback": {"episodic_summary": "often"}}}})
