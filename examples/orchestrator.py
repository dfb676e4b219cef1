"""A small reference orchestrator that uses orchmem as the behavioural contract asks
(docs/architecture.md#the-behavioural-contract; no LLM).

Per message it:

1. writes the inbound transcript back (``write_back(transcript=...)``);
2. gets this message's bulletin and the selector context (``bulletin()``,
   ``context_for("selector", ...)``) and picks a workflow with simple rules;
3. runs a two-step workflow: ``plan`` (a scripted responder turns the request into
   decisions and todos, as JSON) and ``respond`` (builds the reply from the step
   context, i.e. from memory); each step's output is written back
   (``write_back(workflow_output=...)``);

and it has a diagnostics command that writes findings back and investigates with
``context_for("diagnostics", ...)``: bounded evidence, with provenance.

The responder is deterministic string rules standing in for a model: the point is
the memory traffic around it, which is exactly what a real orchestrator does.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from orchmem.worker.client.handles import BulletinResult, Context, WriteHandle
from orchmem.worker.client.memory_client import MemoryClient

TOPIC = re.compile(r"\b(?:plan|launch|organi[sz]e|prepare|migrate|schedule)\s+"
                   r"(?:the\s+|a\s+|an\s+)?(?P<topic>[\w -]+?)"
                   r"(?:\s+(?:for|in|by|on|before)\s+(?P<when>[\w ]+))?[.!?]?$", re.I)


@dataclass
class StepRun:
    step_id: str
    output: Any
    context: Context
    written: WriteHandle


@dataclass
class Reply:
    """What handling one message did, for the caller (and the demo's trace)."""

    text: str
    workflow: str
    bulletin: BulletinResult
    selector: Context
    transcript: WriteHandle
    steps: list[StepRun] = field(default_factory=list)


@dataclass
class DiagnosticsReport:
    question: str
    findings: list[dict[str, str]]
    written: WriteHandle
    evidence: Context


def _is_plan_request(text: str) -> bool:
    """An imperative asking to plan something (not a question about a plan)."""
    stripped = text.strip()
    return not stripped.endswith("?") and TOPIC.search(stripped) is not None


def plan_for(text: str) -> dict[str, list[str]]:
    """The scripted planning step: a request in, decisions and todos out."""
    match = TOPIC.search(text.strip())
    if match is None:
        return {}
    topic = match.group("topic").strip()
    when = match.group("when").strip() if match.group("when") else None
    decisions = [f"Go ahead with the {topic}" + (f", target {when}" if when else "")]
    todos = [f"Draft a checklist for the {topic}", f"Name an owner for the {topic}"]
    if when:
        todos.append(f"Fix the date for the {topic} in {when}")
    return {"decisions": decisions, "todos": todos}


class ReferenceOrchestrator:
    """One orchestrator (one tenant) handling messages from several channels."""

    def __init__(self, client: MemoryClient, *, wait_s: float = 30.0) -> None:
        self.client = client
        self.wait_s = wait_s

    @property
    def orchestrator_id(self) -> str:
        return self.client.orchestrator_id

    def handle_message(self, channel: str, conversation_id: str, text: str) -> Reply:
        transcript = self.client.write_back(transcript={
            "conversationId": conversation_id, "channel": channel,
            "messages": [{"role": "user", "text": text}]})
        bulletin = self.client.bulletin()
        selector = self.client.context_for("selector", text, bulletin=bulletin)
        workflow = "plan" if _is_plan_request(text) else "answer"
        reply = Reply(text="", workflow=workflow, bulletin=bulletin, selector=selector,
                      transcript=transcript)
        run_id = f"run-{uuid.uuid4().hex[:8]}"
        if workflow == "plan":
            step_context = self.client.context_for("step", text, bulletin=bulletin)
            plan: dict[str, Any] = dict(plan_for(text))
            reply.steps.append(StepRun("plan", plan, step_context, self.client.write_back(
                workflow_output={"workflowRunId": run_id, "stepId": "plan", "output": plan})))
        respond_context = self.client.context_for("step", text, bulletin=bulletin)
        reply.text = self._respond(text, respond_context)
        # The reply goes back as JSON under a key that names no memory type: the step
        # output is recorded and parsed, but an answer that recites memories must not
        # be stored again as new ones.
        output: dict[str, Any] = {"reply": reply.text}
        reply.steps.append(StepRun("respond", output, respond_context, self.client.write_back(
            workflow_output={"workflowRunId": run_id, "stepId": "respond", "output": output})))
        return reply

    def _respond(self, text: str, context: Context) -> str:
        recalled = [n.memory for n in context.bundle.nodes[:3]]
        if not recalled:
            return "Noted."
        known = "; ".join(m.content for m in recalled)
        return f"Noted. From memory: {known}"

    def diagnose(self, question: str, findings: list[dict[str, str]]) -> DiagnosticsReport:
        """Record a diagnostics run's findings, then investigate ``question`` with evidence."""
        written = self.client.write_back(diagnostics={
            "runId": f"diag-{uuid.uuid4().hex[:8]}", "findings": findings})
        written.wait(self.wait_s)  # the evidence should include these findings
        evidence = self.client.context_for("diagnostics", question)
        return DiagnosticsReport(question, findings, written, evidence)
