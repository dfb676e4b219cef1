"""From a write-back request to proposed memories: provenance validated once, errors kept."""

from __future__ import annotations

from pathlib import Path

from orchmem.models.core.payloads import WritebackRequest
from orchmem.models.core.shapes import validate
from orchmem.models.workspace.folders import Workspace
from orchmem.models.writeback.extraction import rules_extractor
from orchmem.models.writeback.proposals import Proposals, build

MESSAGES = [{"role": "user", "text": "My name is Sam Carter."},
            {"role": "user", "text": "I live in Lisbon now"}]


def _build(tmp_path: Path, conversation_id: str) -> Proposals:
    workspace = Workspace("o", tmp_path)
    request = validate(WritebackRequest, {"channelTranscript": {
        "conversationId": conversation_id, "messages": MESSAGES}}, workspace=workspace)
    return build(request, rules_extractor, workspace, 8000)


def test_one_sections_candidates_share_one_validated_source(tmp_path: Path) -> None:
    out = _build(tmp_path, "c1")
    assert len(out.items) == 2 and out.skipped == []
    assert out.items[0].memory.source is out.items[1].memory.source
    assert out.items[0].memory.source.conversation_id == "c1"


def test_an_invalid_source_skips_every_candidate_with_its_field_path(tmp_path: Path) -> None:
    out = _build(tmp_path, "c\x01")
    assert out.items == []
    assert [s["reason"] for s in out.skipped] == [
        "invalid MemoryInput: channelTranscript.source.conversationId: must not contain "
        "control characters or NUL bytes (got 'c\\x01')"] * 2
