"""From a write-back request to proposed memories, each with full provenance.

- explicit ``memories`` are taken as given;
- a ``channelTranscript`` goes through the extractor (the user's own messages only):
  sourceType channel_transcript, its conversationId, capturedBy extractor;
- a ``workflowOutput`` in JSON maps its keys to types (``decisions`` -> Decision,
  ``todos`` -> Todo, ...); in text it is read as a document by the extractor:
  sourceType workflow_output, its workflowRunId and stepId;
- ``diagnostics`` findings become Observations whose importance follows severity:
  sourceType diagnostics, capturedBy system;
- with episodic capture on (``episodic_chars``), a transcript also gives one summary
  of its exchange (models/writeback/episodic.py): an Event of tier episodic, last of
  the proposals, with the transcript's provenance, and a ``PartOf`` edge from each
  statement extracted from the transcript to it (``Proposals.edges``, by local keys).

Extracted candidates that break the schema (too long, say) are skipped and reported,
never stored half-valid; explicit memories were validated with the request.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from orchmem.config import MemoryValidationError
from orchmem.models.core.payloads import (
    ChannelTranscript,
    Diagnostics,
    WorkflowOutput,
    WritebackRequest,
)
from orchmem.models.core.shapes import (
    EdgeInput,
    EdgeType,
    MemoryInput,
    MemoryType,
    Source,
    validate,
)
from orchmem.models.workspace.folders import Workspace
from orchmem.models.writeback.episodic import summarize_exchange
from orchmem.models.writeback.extraction import Candidate, Extractor, Message, subject_of
from orchmem.models.writeback.reconcile import Proposed, same_gist

#: JSON keys of a workflow output, and the memory type of their items.
WORKFLOW_KEYS: dict[str, MemoryType] = {
    **dict.fromkeys(("decisions", "decision"), MemoryType.DECISION),
    **dict.fromkeys(("todos", "todo", "tasks", "action_items", "actionitems", "next_steps",
                     "nextsteps"), MemoryType.TODO),
    **dict.fromkeys(("goals", "goal", "objectives"), MemoryType.GOAL),
    **dict.fromkeys(("facts", "fact"), MemoryType.FACT),
    **dict.fromkeys(("preferences", "preference"), MemoryType.PREFERENCE),
    **dict.fromkeys(("identity",), MemoryType.IDENTITY),
    **dict.fromkeys(("events", "event"), MemoryType.EVENT),
    **dict.fromkeys(("observations", "notes", "findings"), MemoryType.OBSERVATION),
}
WORKFLOW_IMPORTANCE = {MemoryType.DECISION: 75, MemoryType.TODO: 65, MemoryType.GOAL: 70,
                       MemoryType.FACT: 55, MemoryType.PREFERENCE: 60, MemoryType.IDENTITY: 70,
                       MemoryType.EVENT: 45, MemoryType.OBSERVATION: 35}
WORKFLOW_CONFIDENCE = 0.8
SEVERITY_IMPORTANCE = {"info": 35, "warning": 55, "error": 75, "critical": 90}
#: An exchange's summary: below the statements it links (an Event is 45).
SUMMARY_IMPORTANCE = 40
SUMMARY_CONFIDENCE = 0.8
#: The prefix of the local keys that link a transcript's statements to its summary.
SUMMARY_KEY = "_exchange"


@dataclass
class _Provenance:
    """The source of one section's candidates: validated with its first valid candidate,
    then reused as that instance (pydantic keeps a model instance as given)."""

    given: dict[str, Any]
    validated: Source | None = None
    #: The placement (scope, sessionId, projectId, tags) of every memory of the section.
    placement: dict[str, Any] = field(default_factory=dict)


@dataclass
class Proposals:
    items: list[Proposed] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    ignored_keys: list[str] = field(default_factory=list)
    #: Edges between proposals (by their local keys): statements -> their exchange.
    edges: list[EdgeInput] = field(default_factory=list)

    def edges_within(self, items: list[Proposed]) -> list[EdgeInput]:
        """The edges whose two ends are among ``items`` (the proposals kept)."""
        keys = {p.memory.key for p in items if p.memory.key}
        return [e for e in self.edges if e.from_memory_id in keys and e.to_memory_id in keys]


def build(request: WritebackRequest, extractor: Extractor, workspace: Workspace,
          max_content_chars: int, episodic_chars: int | None = None) -> Proposals:
    """Every proposed memory of ``request``, explicit ones first, without vectors yet;
    ``episodic_chars``: capture the transcript's exchange in a summary that long."""
    said = request.requested_at
    out = Proposals(items=[Proposed.explicit(
        m if m.created_at or said is None else m.model_copy(update={"created_at": said}))
        for m in request.memories])
    statements: list[int] = []
    if request.channel_transcript is not None:
        first = len(out.items)
        _from_transcript(out, request.channel_transcript, extractor, workspace,
                         max_content_chars, said)
        statements = list(range(first, len(out.items)))
    if request.workflow_output is not None:
        _from_workflow(out, request.workflow_output, extractor, workspace, max_content_chars,
                       said)
    if request.diagnostics is not None:
        _from_diagnostics(out, request.diagnostics, workspace, max_content_chars, said)
    if request.channel_transcript is not None and episodic_chars is not None:
        # last, so that the ids of the other proposals do not depend on the setting
        _exchange(out, request, statements, workspace, min(episodic_chars, max_content_chars))
    return out


def _add(out: Proposals, candidate: Candidate, source: _Provenance, workspace: Workspace,
         max_content_chars: int, where: str, strict: bool = False,
         said: datetime | None = None, since: datetime | None = None) -> None:
    """Validate and append; an invalid extracted candidate is skipped, a given one fails.

    ``said`` becomes its createdAt, ``since`` its validFrom (a message's time)."""
    data: dict[str, Any] = {"type": candidate.type.value, "content": candidate.content,
            "importance": candidate.importance, "confidence": candidate.confidence,
            "source": source.validated or source.given, **source.placement}
    if said is not None:
        data["createdAt"] = said
    if since is not None:
        data["validFrom"] = since
    try:
        memory = validate(MemoryInput, data, workspace=workspace,
                          max_content_chars=max_content_chars, where=where)
    except MemoryValidationError as exc:
        if strict:
            raise
        out.skipped.append({"from": where, "reason": exc.message[:300]})
        return
    source.validated = memory.source
    out.items.append(Proposed.extracted(memory, candidate))


def _from_transcript(out: Proposals, transcript: ChannelTranscript, extractor: Extractor,
                     workspace: Workspace, max_content_chars: int,
                     said: datetime | None) -> None:
    source = _Provenance({"sourceType": "channel_transcript", "capturedBy": "extractor",
                          "conversationId": transcript.conversation_id},
                         placement=transcript.placement(transcript.conversation_id))
    for message in transcript.messages:
        # One message at a time, so each memory carries the time its message was sent.
        for candidate in extractor([Message(role=message.role, text=message.text)],
                                   "transcript"):
            _add(out, candidate, source, workspace, max_content_chars, "channelTranscript",
                 said=message.at or said, since=message.at or said)


def _from_workflow(out: Proposals, output: WorkflowOutput, extractor: Extractor,
                   workspace: Workspace, max_content_chars: int,
                   said: datetime | None) -> None:
    source = _Provenance({"sourceType": "workflow_output", "capturedBy": "extractor",
                          "workflowRunId": output.workflow_run_id, "stepId": output.step_id},
                         placement=output.placement())
    if isinstance(output.output, str):
        for candidate in extractor([Message(role="tool", text=output.output)], "document"):
            _add(out, candidate, source, workspace, max_content_chars, "workflowOutput",
                 said=said)
        return
    for key, value in output.output.items():
        memory_type = WORKFLOW_KEYS.get(key.lower().replace("-", "_"))
        if memory_type is None:
            out.ignored_keys.append(key)
            continue
        for index, item in enumerate(value if isinstance(value, list) else [value]):
            where = f"workflowOutput.output.{key}.{index}"
            _add(out, _workflow_item(memory_type, item, where), source, workspace,
                 max_content_chars, where, strict=True, said=said)


def _workflow_item(memory_type: MemoryType, item: Any, where: str) -> Candidate:
    """A workflow JSON item: a string, or ``{"content", "importance"?, "confidence"?}``."""
    importance = WORKFLOW_IMPORTANCE[memory_type]
    confidence = WORKFLOW_CONFIDENCE
    if isinstance(item, dict):
        unknown = set(item) - {"content", "importance", "confidence"}
        content = item.get("content")
        importance = item.get("importance", importance)
        confidence = item.get("confidence", confidence)
        if unknown or not isinstance(content, str):
            message = (f"{where}: an item is a string or an object with 'content' "
                       f"(and optional 'importance', 'confidence')")
            raise MemoryValidationError(message, [{"path": where, "message": message}])
    elif isinstance(item, str):
        content = item
    else:
        message = f"{where}: expected a string or an object, got {type(item).__name__}"
        raise MemoryValidationError(message, [{"path": where, "message": message}])
    subject, value = subject_of(memory_type, content)
    return Candidate(type=memory_type, content=content, importance=importance,
                     confidence=confidence, stated=False, subject=subject, value=value)


def _from_diagnostics(out: Proposals, diagnostics: Diagnostics, workspace: Workspace,
                      max_content_chars: int, said: datetime | None) -> None:
    given: dict[str, Any] = {"sourceType": "diagnostics", "capturedBy": "system"}
    if diagnostics.run_id:
        given["workflowRunId"] = diagnostics.run_id
    source = _Provenance(given, placement=diagnostics.placement())
    for index, finding in enumerate(diagnostics.findings):
        where = f" {finding.component}" if finding.component else ""
        candidate = Candidate(type=MemoryType.OBSERVATION,
                              content=f"[{finding.severity}]{where}: {finding.text}",
                              importance=SEVERITY_IMPORTANCE[finding.severity], confidence=0.9)
        _add(out, candidate, source, workspace, max_content_chars,
             f"diagnostics.findings.{index}", said=said)


def _exchange(out: Proposals, request: WritebackRequest, statements: list[int],
              workspace: Workspace, max_chars: int) -> None:
    """Append the summary of the transcript's exchange and link its statements to it.

    No summary when the transcript holds no exchange, or when it would only restate one
    of its own statements of the same type (the statement is the record then)."""
    transcript = request.channel_transcript
    assert transcript is not None
    content = summarize_exchange([Message(role=m.role, text=m.text)
                                  for m in transcript.messages], max_chars)
    said = [p.memory for p in (out.items[i] for i in statements)]
    if content is None or any(m.type == MemoryType.EVENT and same_gist(content, m.content)
                              for m in said):
        return
    taken = {p.memory.key for p in out.items if p.memory.key}
    prefix = SUMMARY_KEY
    while any(k.startswith(prefix) for k in taken):
        prefix = f"_{prefix}"
    at = next((m.at for m in transcript.messages if m.at), None) or request.requested_at
    source = _Provenance({"sourceType": "channel_transcript", "capturedBy": "extractor",
                          "conversationId": transcript.conversation_id},
                         placement={**transcript.placement(transcript.conversation_id),
                                    "tier": "episodic", "key": f"{prefix}.summary"})
    before = len(out.items)
    _add(out, Candidate(type=MemoryType.EVENT, content=content,
                        importance=SUMMARY_IMPORTANCE, confidence=SUMMARY_CONFIDENCE),
         source, workspace, max_chars, "channelTranscript.summary", said=at, since=at)
    if len(out.items) == before:
        return
    for n, index in enumerate(statements):
        key = f"{prefix}.{n}"
        item = out.items[index]
        out.items[index] = replace(item, memory=item.memory.model_copy(update={"key": key}))
        out.edges.append(EdgeInput(from_memory_id=key, to_memory_id=f"{prefix}.summary",
                                   edge_type=EdgeType.PART_OF, weight=1.0,
                                   reason="said in this exchange"))
