"""render_context: the prompt block of context_for, cited and bounded (pure, no services)."""

from __future__ import annotations

import re

import pytest

from orchmem.models.core.shapes import CapturedBy, MemoryNode, MemoryType, SourceType, Status
from orchmem.models.recall.bundle import Provenance, RecallBundle, RecalledMemory, SourceRecord
from orchmem.models.recall.context import render_context
from orchmem.worker.client.handles import BulletinResult

BULLETIN_TEXT = "\n".join(
    ["## active_goals"] + [f"- Goal number {i} of the quarter [m-goal-{i:02d}]" for i in range(30)])


def bundle(count: int) -> RecallBundle:
    nodes, provenance = [], []
    for i in range(count):
        source = SourceRecord.model_construct(
            source_type=SourceType.CHANNEL_TRANSCRIPT, source_path=None,
            conversation_id=f"conv-{i}", workflow_run_id=None, step_id=None,
            captured_by=CapturedBy.EXTRACTOR, captured_at="2026-11-23T10:00:00Z")
        memory = MemoryNode.model_construct(
            memory_id=f"m-{i:03d}", orchestrator_id="o", type=MemoryType.FACT, importance=50,
            content=f"fact number {i} " * 5, summary="", confidence=0.9, source=source,
            status=Status.ACTIVE, created_at="", updated_at="")
        nodes.append(RecalledMemory.model_construct(rank=i + 1, memory=memory, scores=None))
        provenance.append(Provenance.model_construct(memory_id=memory.memory_id,
                                                     sources=[source]))
    return RecallBundle.model_construct(
        orchestrator_id="o", query="q", nodes=nodes, edges=[], neighbors=[],
        provenance=provenance, mode="hybrid", vector_available=True, candidates={},
        warnings=[], took_ms=0.0)


BULLETIN = BulletinResult(bulletin={}, text=BULLETIN_TEXT, source="live")


@pytest.mark.parametrize("max_chars", [200, 400, 700, 1500, 4000])
@pytest.mark.parametrize("diagnostics", [False, True])
def test_the_context_stays_in_bounds_and_never_cuts_a_citation(
        max_chars: int, diagnostics: bool) -> None:
    text = render_context("step", "q", BULLETIN, bundle(20), max_chars,
                          with_sources=diagnostics)
    assert len(text) <= max_chars
    assert "[memories relevant to this step]" in text
    for line in text.splitlines():
        if line.startswith("- Goal"):
            assert re.search(r"\[m-goal-\d\d\]$", line), line
        if line.startswith("- (Fact"):
            assert re.match(r"- \(Fact m-\d{3}\) ", line), line
    # The bulletin leaves room for the memories: given room for one, one is there.
    if max_chars >= 400:
        assert "(Fact m-000)" in text


def test_every_memory_line_says_where_it_came_from() -> None:
    text = render_context("selector", "q", BULLETIN, bundle(3), 4000)
    for i in range(3):
        assert f"(Fact m-{i:03d})" in text and f"[from channel_transcript conv-{i}]" in text
    detailed = render_context("diagnostics", "q", BULLETIN, bundle(3), 4000, with_sources=True)
    assert "source: channel_transcript conv-0 at 2026-11-23T10:00:00Z" in detailed


def test_cuts_are_announced() -> None:
    text = render_context("step", "q", BULLETIN, bundle(20), 900)
    assert "(bulletin cut to fit)" in text and "(more memories cut to fit)" in text
    whole = render_context("step", "q", BulletinResult({}, "## active_goals\n- one [m-1]",
                                                       "live"), bundle(2), 4000)
    assert "cut to fit" not in whole
