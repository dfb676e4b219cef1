"""Ingest without a database: a file's text becomes proposals or a stable reason code, and
a finished file gets a name that replaces nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchmem.config import IngestRejected
from orchmem.config.memory_settings import IngestSettings
from orchmem.models.ingest.outcomes import move_to_processed, move_to_rejected
from orchmem.models.ingest.parse import MAX_JSON_DEPTH, decode, parse
from orchmem.models.workspace.folders import Workspace

SHA = "ab" * 32


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace("unit", tmp_path)


def reason_of(error: pytest.ExceptionInfo[IngestRejected]) -> str:
    return error.value.reason


@pytest.mark.parametrize(("data", "reason"), [
    (b"caf\xe9", "not_utf8"), (b"a\x00b", "binary"), (b"bell\x07", "binary"),
    (b" \n\t ", "empty")])
def test_bytes_that_are_not_text_are_refused_with_their_reason(data: bytes, reason: str) -> None:
    with pytest.raises(IngestRejected) as error:
        decode(data, "notes.md")
    assert reason_of(error) == reason


def test_a_byte_order_mark_is_not_part_of_the_text() -> None:
    assert decode("\ufeffI prefer tea.".encode(), "notes.md") == "I prefer tea."


def test_json_records_become_explicit_proposals_citing_the_file(workspace: Workspace) -> None:
    path = workspace.ingest_dir / "facts.json"
    text = json.dumps([{"type": "Fact", "content": "The budget is 40k"},
                       {"type": "Preference", "content": "I prefer async standups"}])
    proposals, edges = parse(path, text, workspace, IngestSettings(), 4000)
    assert [p.memory.content for p in proposals] == [
        "The budget is 40k", "I prefer async standups"]
    assert {p.memory.source.source_path for p in proposals} == {os.path.realpath(path)}
    assert edges == []


@pytest.mark.parametrize(("text", "reason"), [
    ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "invalid_json"),
    ('{"type": "Fact", "content": "cut', "invalid_json"),
    ("42", "schema_violation"),
    ('[{"type": "Fact", "content": "x", "source": {"sourcePath": "/etc/passwd"}}]',
     "schema_violation"),
    ("[]", "empty"),
])
def test_a_json_file_that_breaks_the_rules_is_refused_with_its_reason(
        workspace: Workspace, text: str, reason: str) -> None:
    with pytest.raises(IngestRejected) as error:
        parse(workspace.ingest_dir / "facts.json", text, workspace, IngestSettings(), 4000)
    assert reason_of(error) == reason


def test_more_memories_than_the_limit_is_too_many(workspace: Workspace) -> None:
    text = json.dumps([{"type": "Fact", "content": f"Fact {i}"} for i in range(3)])
    with pytest.raises(IngestRejected) as error:
        parse(workspace.ingest_dir / "facts.json", text, workspace,
              IngestSettings(max_memories_per_file=2), 4000)
    assert reason_of(error) == "too_many_memories"


def test_a_taken_name_gets_the_sha256_prefix_then_a_counter(
        workspace: Workspace, tmp_path: Path) -> None:
    moved = []
    for body in ("one", "two", "three"):
        dropped = tmp_path / "a.md"
        dropped.write_text(body)
        moved.append(move_to_processed(workspace, dropped, SHA).name)
    assert moved == ["a.md", f"a.{SHA[:12]}.md", f"a.{SHA[:12]}.2.md"]


def test_a_rejected_file_lies_beside_its_reason_and_long_names_still_fit(
        workspace: Workspace, tmp_path: Path) -> None:
    name = "ü" * 100 + "x" * 46 + ".pdf"
    dropped = tmp_path / name
    dropped.write_bytes(b"%PDF")
    target = move_to_rejected(workspace, dropped, "", "unsupported_extension", "not text")
    assert len(os.fsencode(target.name + ".reason.json")) <= 255
    reason = json.loads(target.with_name(target.name + ".reason.json").read_text())
    assert (reason["file"], reason["sha256"], reason["reason"]) == (
        name, None, "unsupported_extension")
    assert target.read_bytes() == b"%PDF" and not dropped.exists()
