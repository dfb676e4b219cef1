"""Recall answers what was asked: the type a question names, and nothing when nothing fits.

Real MiniLM, a real SQLite file, the real client in immediate mode (no broker).
"""

from __future__ import annotations

from typing import Any

import pytest
from orchmem_testing import make_settings, unique_id

from orchmem.models.embedding.embedders import Embedder
from orchmem.worker import MemoryClient

#: The acme-support memories of `orchmem demo`, as its workflows write them.
DEMO = [
    ("Identity", "My name is Dana Reyes."),
    ("Identity", "I work as a support lead at Acme."),
    ("Preference", "I prefer detailed answers with examples."),
    ("Decision", "Go ahead with the launch of the new help center, target March"),
    ("Todo", "Draft a checklist for the launch of the new help center"),
    ("Todo", "Name an owner for the launch of the new help center"),
    ("Todo", "Fix the date for the launch of the new help center in March"),
    ("Fact", "The deadline is Friday."),
    ("Observation", "[error] queue: Support ticket queue backlog at 340"),
]
IMPORTANCE = {"Identity": 70, "Preference": 60, "Decision": 75, "Todo": 65, "Fact": 55,
              "Observation": 75}


@pytest.fixture(scope="module")
def demo_client(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> MemoryClient:
    root = tmp_path_factory.mktemp("relevance") / "root"
    client = MemoryClient(unique_id("relevance"), make_settings(root, "redis://127.0.0.1:1/0"),
                          immediate=True)
    memories: list[dict[str, Any]] = [
        {"type": t, "content": c, "importance": IMPORTANCE[t], "confidence": 0.8}
        for t, c in DEMO]
    result = client.write_back(memories=memories).wait(60)
    assert result is not None and result["ok"], result
    return client


def test_a_question_about_a_decision_ranks_the_decision_first(
        demo_client: MemoryClient) -> None:
    bundle = demo_client.recall("What did we decide about the help center launch?")
    assert bundle.nodes[0].memory.type.value == "Decision", [
        (n.memory.type.value, n.scores.score) for n in bundle.nodes]
    assert bundle.nodes[0].scores.intent > 1.0
    todos = demo_client.recall("What is left to do for the help center launch?")
    assert todos.nodes[0].memory.type.value == "Todo"


UNRELATED = ["zebra quantum submarine", "What is the melting point of tungsten?",
             "How do I configure BGP route reflectors?", "Explain monads in Haskell"]


@pytest.mark.parametrize("query", UNRELATED)
def test_an_unrelated_question_recalls_nothing(demo_client: MemoryClient, query: str) -> None:
    bundle = demo_client.recall(query)
    assert bundle.nodes == [], [(n.memory.content, n.scores.vector_cosine)
                                for n in bundle.nodes]
    assert bundle.candidates["vector"] > 0 and bundle.candidates["belowFloor"] > 0
    assert bundle.warnings == []


def test_context_for_an_unrelated_question_adds_no_memories(demo_client: MemoryClient) -> None:
    context = demo_client.context_for("selector", "zebra quantum submarine",
                                      bulletin=demo_client._fallback([]))
    recalled = context.text.split("[memories relevant to this selector]")[1]
    assert recalled.strip() == "- (none)"


def test_the_floor_keeps_what_is_asked_for_and_can_be_turned_off(
        demo_client: MemoryClient) -> None:
    work = demo_client.recall("Where does Dana work?")
    assert "I work as a support lead at Acme." in [n.memory.content for n in work.nodes]
    assert demo_client.recall("Dana").nodes, "a name found by full text is kept"
    off = demo_client.memory.retrieval.model_copy(update={"min_similarity": 0.0,
                                                          "min_similarity_text": 0.0})
    from orchmem.models.recall.search import recall

    unfloored = recall(demo_client.orchestrator_id, "zebra quantum submarine",
                       databases=demo_client.databases, params=off)
    assert len(unfloored.nodes) == len(DEMO)
