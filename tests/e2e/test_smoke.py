"""End-to-end smoke tests of the behavioural contract
(docs/architecture.md#the-behavioural-contract), through the reference orchestrator.

Real Redis, a real Celery worker, real SQLite files and the real MiniLM model.
"""

from __future__ import annotations

import pytest
from orchmem_testing import unique_id

from orchmem.config import Settings
from orchmem.examples import ReferenceOrchestrator
from orchmem.models.workspace.memlog import read_log
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import OrchmemCelery

pytestmark = pytest.mark.usefixtures("worker")


@pytest.fixture
def bot(app: OrchmemCelery, settings: Settings, orch_id: str) -> ReferenceOrchestrator:
    return ReferenceOrchestrator(MemoryClient(orch_id, settings, app=app))


def test_message_a_creates_a_memory_and_message_b_recalls_it(bot: ReferenceOrchestrator) -> None:
    bot.handle_message("slack", "conv-a", "I'm allergic to shellfish.")
    reply = bot.handle_message("email", "conv-b",
                               "Any allergies I should tell the restaurant about?")
    recalled = [n.memory.content for n in reply.selector.bundle.nodes]
    assert "I'm allergic to shellfish." in recalled
    assert "allergic to shellfish" in reply.selector.text
    assert "allergic to shellfish" in reply.bulletin.text
    # A vague question the model relates to nothing stored (cosine 0.06) recalls nothing
    # under the relevance floor, but the prompt still carries the allergy: the bulletin.
    vague = bot.handle_message("email", "conv-c", "Any dinner ideas for the team event?")
    assert "allergic to shellfish" in vague.selector.text


def test_a_step_output_creates_decision_and_todo_that_change_a_later_step(
        bot: ReferenceOrchestrator) -> None:
    before = bot.client.context_for("step", "what are the next steps for the partner portal?")
    assert "partner portal" not in before.text
    reply = bot.handle_message("slack", "c1", "Plan the rollout of the partner portal for April.")
    assert reply.workflow == "plan"
    plan = reply.steps[0]
    assert plan.step_id == "plan" and plan.output["decisions"] and plan.output["todos"]
    written = plan.written.wait(60)
    assert written is not None
    types = {n.type.value for n in bot.client.get(written["created"])}
    assert types == {"Decision", "Todo"}
    later = bot.client.context_for("step", "what are the next steps for the partner portal?")
    assert "Draft a checklist for the rollout of the partner portal" in later.text
    assert "Go ahead with the rollout of the partner portal" in later.bulletin.text
    node = next(n for n in later.bundle.nodes if n.memory.type.value == "Todo")
    assert node.memory.source.workflow_run_id and node.memory.source.step_id == "plan"


def test_diagnostics_retrieve_bounded_evidence_with_provenance(
        bot: ReferenceOrchestrator, settings: Settings) -> None:
    bot.handle_message("slack", "c1", "We decided to move the nightly export to 2am.")
    report = bot.diagnose("why did the nightly export fail", [
        {"severity": "error", "component": "export", "text": "Nightly export timed out at 2:40"},
        {"severity": "info", "component": "db", "text": "Vacuum ran from 2:00 to 2:45"}])
    text = report.evidence.text
    assert len(text) <= settings.memory.context.max_chars
    assert "[error] export: Nightly export timed out at 2:40" in text
    assert "source: diagnostics" in text and "source: channel_transcript c1" in text
    provenance = {p.memory_id: p.sources for p in report.evidence.bundle.provenance}
    assert all(provenance[n.memory.memory_id] for n in report.evidence.bundle.nodes)


def test_recall_across_channels_of_one_orchestrator_is_allowed(bot: ReferenceOrchestrator) -> None:
    bot.handle_message("whatsapp", "w-1", "My name is Ingrid Solberg.")
    bundle = bot.client.recall("what is the user's name?")
    assert bundle.nodes[0].memory.content == "My name is Ingrid Solberg."
    assert bundle.nodes[0].memory.source.conversation_id == "w-1"


def test_another_orchestrators_memory_is_denied_and_logged(
        app: OrchmemCelery, settings: Settings, bot: ReferenceOrchestrator) -> None:
    bot.handle_message("slack", "c1", "The vault code is 4471.")
    intruder_id = unique_id("intruder")
    intruder = MemoryClient(intruder_id, settings, app=app)
    bundle = intruder.recall("vault code", orchestrator_id=bot.orchestrator_id)
    assert bundle.nodes == [] and "may not recall" in bundle.warnings[0]
    own = bot.client.recall("vault code")
    foreign_ids = intruder.recall("vault code", memory_ids=own.memory_ids[:1])
    assert foreign_ids.nodes == []
    log = read_log(settings.runtime_root(intruder_id) / "memory" / "logs" / "memory.log")
    assert [r["event"] for r in log].count("scope_denied") == 2
    assert not (settings.runtime_root(intruder_id) / "memory" / "memory.db").exists()


def test_the_bulletin_is_built_for_every_message_and_injected_into_contexts(
        bot: ReferenceOrchestrator, settings: Settings) -> None:
    messages = ["I prefer tea.", "Plan the move of the office for May.", "The rent is 2400 EUR.",
                "How are you?", "Remind me to call the landlord."]
    replies = [bot.handle_message("web", "c9", text) for text in messages]
    assert all(r.bulletin.source == "live" for r in replies)
    for reply in replies:
        assert reply.bulletin.text in reply.selector.text
        for step in reply.steps:
            assert reply.bulletin.text in step.context.text
    log = read_log(settings.runtime_root(bot.orchestrator_id) / "memory" / "logs" / "memory.log")
    assert [r["event"] for r in log].count("bulletin") == len(messages)
    assert "Remind me to call the landlord." in replies[-1].bulletin.text or \
        "Remind me to call the landlord." in bot.client.bulletin().text
    latest = settings.runtime_root(bot.orchestrator_id) / "memory" / "bulletins"
    assert (latest / "latest.json").exists() and (latest / "latest.md").exists()
