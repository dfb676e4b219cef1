"""What a new user sees first: a question about a name, two opposite preferences, a type
written in lower case. Real MiniLM and SQLite behind ``MemoryClient(..., immediate=True)``.

The held-out cases were written before the rules they check and not tuned on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from orchmem_testing import make_settings, unique_id

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.worker import MemoryClient
from orchmem.worker.cli.main import main

#: Stored beside the name: a preference that shares the question's words ("the user").
#: Each case: (what is stored, the question, the memory that must answer it first).
NAME_CASES = [
    ([("Identity", "My name is Dana."), ("Preference", "The user prefers green tea to coffee")],
     "what is the user's name?", "My name is Dana."),
]
NAME_HELD_OUT = [
    ([("Identity", "My name is Priya."), ("Preference", "The client prefers calls in the morning"),
      ("Fact", "The client's contract renews in March")],
     "Do you remember the client's name?", "My name is Priya."),
]


@pytest.fixture
def offline(tmp_path: Path, embedder: Embedder) -> Settings:
    return make_settings(tmp_path / "root", "redis://127.0.0.1:1/0")


def _memory(memory_type: str, content: str) -> dict[str, Any]:
    return {"type": memory_type, "content": content, "importance": 60,
            "source": {"sourceType": "manual", "capturedBy": "user"}}


def _said(client: MemoryClient, text: str, conversation: str) -> dict[str, Any]:
    result = client.write_back(transcript={"conversationId": conversation,
                                           "messages": [{"role": "user", "text": text}]}).wait()
    assert result is not None and result["ok"], result
    return result


@pytest.mark.parametrize(("stored", "question", "answer"), NAME_CASES + NAME_HELD_OUT)
def test_a_question_about_a_name_is_answered_by_the_name_first(
        offline: Settings, stored: list[tuple[str, str]], question: str, answer: str) -> None:
    client = MemoryClient(unique_id("name"), offline, immediate=True)
    assert client.write_back(memories=[_memory(t, c) for t, c in stored]).wait()["ok"]
    bundle = client.recall(question)
    assert bundle.nodes[0].memory.content == answer, [n.memory.content for n in bundle.nodes]


#: (said first, noted later) by the same user: opposite preferences.
OPPOSITE = [("I prefer coffee to tea", "Prefers tea")]
OPPOSITE_HELD_OUT = [("I prefer email over phone calls.", "Prefers phone calls"),
                     ("I prefer aisle seats to window seats.", "Prefers window seats")]


@pytest.mark.parametrize(("said", "noted"), OPPOSITE + OPPOSITE_HELD_OUT)
def test_opposite_preferences_are_linked_and_the_older_one_ranks_lower(
        offline: Settings, said: str, noted: str) -> None:
    client = MemoryClient(unique_id("prefs"), offline, immediate=True)
    [older] = _said(client, said, "c1")["created"]
    result = client.write_back(memories=[_memory("preference", noted)]).wait()
    [newer] = result["created"]
    assert result["contradicted"] == [[newer, older]] or result["superseded"] == [older]
    bundle = client.recall(noted, include_inactive=True)
    assert bundle.memory_ids[:2] == [newer, older]


def test_a_preference_that_only_restates_an_older_one_reinforces_it(offline: Settings) -> None:
    client = MemoryClient(unique_id("prefs"), offline, immediate=True)
    [older] = _said(client, "I prefer email over phone calls.", "c1")["created"]
    result = client.write_back(memories=[_memory("Preference", "Prefers email")]).wait()
    assert (result["created"], result["reinforced"], result["contradicted"]) == ([], [older], [])


def test_preferences_of_other_people_are_not_the_users(offline: Settings) -> None:
    client = MemoryClient(unique_id("prefs"), offline, immediate=True)
    _said(client, "The customer prefers email over phone calls.", "c1")
    result = _said(client, "I prefer phone calls.", "c2")
    assert (result["contradicted"], result["superseded"]) == ([], [])
    assert {n.memory.type.value for n in client.recall("email or phone calls?").nodes} == \
        {"Preference"}


def test_a_type_in_lower_case_is_stored_and_filtered_by_its_name(offline: Settings) -> None:
    client = MemoryClient(unique_id("types"), offline, immediate=True)
    [fact] = client.write_back(memories=[_memory("fact", "The office is in Lyon")]).wait()[
        "memoryIds"]
    bundle = client.recall("where is the office?", types=["FACT"])
    assert [(n.memory.memory_id, n.memory.type.value) for n in bundle.nodes] == [(fact, "Fact")]


@pytest.mark.parametrize("command", [
    ["write", "--orch", "o", "--type", "fact", "--content", "x"],
    ["list", "--orch", "o", "--type", "fact"],
    ["recall", "--orch", "o", "--type", "fact", "x"],
    ["supersede", "--orch", "o", "m-00000000-0000000000000000", "--content", "x",
     "--type", "fact"],
])
def test_the_cli_takes_a_type_in_any_case(command: list[str]) -> None:
    # The arguments are parsed (as the command would get them) and not run.
    sub = main.get_command(click.Context(main), command[0])
    assert sub is not None
    parsed = sub.make_context(command[0], command[1:])
    chosen = parsed.params.get("memory_type") or parsed.params["types"]
    assert chosen in ("Fact", ("Fact",))
    assert CliRunner().invoke(main, [command[0], "--help"]).exit_code == 0
