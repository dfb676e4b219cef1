"""Query expansion from open insights and the "fallback" recall mode, through the real
worker: a question about one side of an open evolves/conflict insight also searches the
other side's terms (bounded, in the plan); with no open insight recall answers exactly
as without expansion; under context pressure "fallback" skips recall and keeps the
working block."""

from __future__ import annotations

from typing import Any

from orchmem.config import Settings
from orchmem.worker import MemoryClient

QUESTION = "Which port does the billing service use?"


def memory(content: str, at: str) -> dict[str, Any]:
    return {"type": "Fact", "content": content, "createdAt": at,
            "source": {"sourceType": "manual", "capturedBy": "extractor"}}


def client_for(settings: Settings, orch_id: str, app: Any, **changes: Any) -> MemoryClient:
    ours = settings.model_copy(deep=True)
    for section, values in changes.items():
        for name, value in values.items():
            setattr(getattr(ours.memory, section), name, value)
    return MemoryClient(orch_id, ours, app=app)


def write_ports(client: MemoryClient) -> list[str]:
    written = client.write_back(memories=[
        memory("The billing service runs on port 8080", "2026-01-01T00:00:00Z"),
        memory("The billing service now runs on port 9090",
               "2026-02-01T00:00:00Z")]).wait(60)
    assert written is not None and written["ok"], written
    return list(written["memoryIds"])


def answer(bundle: Any) -> list[Any]:
    """The answer without what moves with the clock between two recalls (recency, and
    the score it multiplies)."""
    return [(n.rank, n.memory.memory_id, n.scores.rrf, n.scores.vector_rank,
             n.scores.text_rank, n.scores.vector_cosine, n.scores.text_bm25)
            for n in bundle.nodes]


def test_an_open_insight_expands_a_matching_question_and_is_in_the_plan(
        settings: Settings, app: Any, worker: Any, orch_id: str) -> None:
    client = client_for(settings, orch_id, app, retrieval={"insight_terms": 3})
    write_ports(client)
    plain = client.recall(QUESTION)
    assert "expansion" not in (plain.plan or {})  # no open insight yet
    reflected = client.reflect().wait(120)
    assert reflected is not None and reflected["ok"] and reflected["proposals"] == 1

    expanded = client.recall(QUESTION)
    expansion = (expanded.plan or {})["expansion"]
    assert len(expansion["insightIds"]) == 1 and len(expansion["terms"]) == 3
    assert all(t not in QUESTION.lower() for t in expansion["terms"])
    assert "expansion" not in (client.recall("What is the weather like?").plan or {})
    off = client_for(settings, orch_id, app, retrieval={"insight_terms": 0})
    assert "expansion" not in (off.recall(QUESTION).plan or {})


def test_without_an_open_insight_recall_answers_exactly_as_without_expansion(
        settings: Settings, app: Any, worker: Any, orch_id: str) -> None:
    on = client_for(settings, orch_id, app)
    write_ports(on)
    off = client_for(settings, orch_id, app, retrieval={"insight_terms": 0})
    for question in (QUESTION, "port 9090", "What changed in February?"):
        a, b = on.recall(question), off.recall(question)
        assert answer(a) == answer(b) and a.plan == b.plan and a.warnings == b.warnings


def test_fallback_skips_recall_under_pressure_and_keeps_working_memory(
        settings: Settings, app: Any, worker: Any, orch_id: str) -> None:
    client = client_for(settings, orch_id, app, context={"recall_mode": "fallback",
                                                         "working_refresh_timeout_s": 30.0})
    ids = write_ports(client)
    pressed = client.context_for("step", QUESTION, working=True, pressure=0.9)
    assert pressed.bundle.nodes == []
    assert any("recall skipped under context pressure" in w for w in pressed.warnings)
    assert "# Working memory of" in pressed.text and ids[0] in pressed.text
    relaxed = client.context_for("step", QUESTION, working=True, pressure=0.2)
    assert set(relaxed.bundle.memory_ids) >= set(ids)
    always = client_for(settings, orch_id, app)
    assert always.context_for("step", QUESTION, pressure=0.99).bundle.nodes
