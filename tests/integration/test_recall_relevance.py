"""Recall answers what was asked: the type a question names, and nothing when nothing fits.

Real MiniLM, a real SQLite file, the real client in immediate mode (no broker).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings, unique_id

from orchmem.models.embedding import Embedder
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
