"""Task payloads: what an orchestrator publishes, validated at the worker's door.

A payload is plain JSON (Celery carries JSON only). Its idempotency key is given, or
derived here from the canonical JSON of the payload, so the same request published
twice has the same key on both sides of the queue.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from orchmem.config import MemoryValidationError
from orchmem.models.core.governance_fields import Scope, Tags, scope_error
from orchmem.models.core.shapes import (
    CONTROL_CHARS,
    EdgeInput,
    MemoryInput,
    ShortText,
    WireModel,
    check_timestamp,
    validate,
)
from orchmem.models.workspace.folders import Workspace

_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")
IdempotencyKey = Annotated[str, Field(strict=True, min_length=1, max_length=200)]


def check_key(value: object, where: str = "idempotencyKey") -> str:
    """Return ``value`` if it is a valid idempotency key (1-200 printable ASCII, no spaces)."""
    if not isinstance(value, str) or _KEY.fullmatch(value) is None:
        message = f"{where}: must be 1-200 printable ASCII characters without spaces"
        raise MemoryValidationError(message, [{"path": where, "message": message}])
    return value


def derive_key(orchestrator_id: str, kind: str, payload: dict[str, Any]) -> str:
    """The key of a payload that has none: a hash of its canonical JSON."""
    body = {k: v for k, v in payload.items() if k != "idempotencyKey"}
    try:
        canonical = json.dumps([orchestrator_id, kind, body], sort_keys=True,
                               separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(f"payload is not plain JSON: {exc}") from None
    return f"{kind}-{hashlib.sha256(canonical.encode()).hexdigest()[:32]}"


def key_of(orchestrator_id: str, kind: str, payload: Any) -> str:
    """The given idempotency key of ``payload``, or the derived one."""
    if not isinstance(payload, dict):
        raise MemoryValidationError(
            f"payload must be a JSON object, got {type(payload).__name__}",
            [{"path": "payload", "message": "must be a JSON object"}])
    given = payload.get("idempotencyKey")
    if given is not None:
        return check_key(given)
    return derive_key(orchestrator_id, kind, payload)


MAX_MESSAGE_CHARS = 20_000


def _plain(value: str) -> str:
    if CONTROL_CHARS.search(value):
        raise ValueError("must be plain text without control characters or NUL bytes")
    return value


PlainText = Annotated[str, Field(strict=True, min_length=1, max_length=MAX_MESSAGE_CHARS),
                      AfterValidator(_plain)]


class TranscriptMessage(WireModel):
    role: Literal["user", "assistant", "system", "tool"]
    text: PlainText
    at: datetime | None = None

    @field_validator("at", mode="before")
    @classmethod
    def _at(cls, value: Any) -> Any:
        return None if value is None else check_timestamp(value)


class Placed(WireModel):
    """Where the memories a transcript, workflow output or diagnostics run gives belong:
    scope global by default; a transcript's sessionId defaults to its
    conversationId (recorded on every memory, so ``forget --session`` finds them)."""

    scope: Scope = Scope.GLOBAL
    session_id: ShortText | None = None
    project_id: ShortText | None = None
    tags: Tags = Field(default_factory=list)

    @model_validator(mode="after")
    def _scope_complete(self) -> Placed:
        # a transcript's conversationId is its session unless a sessionId says otherwise
        session = self.session_id or getattr(self, "conversation_id", None)
        problem = scope_error(self.scope, session, self.project_id)
        if problem:
            raise ValueError(problem)
        return self

    def placement(self, session_id: str | None = None) -> dict[str, Any]:
        """The governance fields of each memory this section gives, as MemoryInput JSON."""
        placed: dict[str, Any] = {"scope": self.scope.value,
                                  "sessionId": self.session_id or session_id,
                                  "projectId": self.project_id, "tags": list(self.tags)}
        return {k: v for k, v in placed.items() if v is not None}


class ChannelTranscript(Placed):
    """An inbound conversation: only the user's own statements can become memories."""

    conversation_id: ShortText
    channel: ShortText | None = None
    messages: list[TranscriptMessage] = Field(min_length=1, max_length=500)


class WorkflowOutput(Placed):
    """A workflow step's output: text, or JSON whose keys name memory types."""

    workflow_run_id: ShortText
    step_id: ShortText
    output: PlainText | dict[str, Any]


class Finding(WireModel):
    severity: Literal["info", "warning", "error", "critical"]
    text: PlainText
    component: ShortText | None = None


class Diagnostics(Placed):
    """Findings of a diagnostics run, each stored as an Observation with its severity."""

    run_id: ShortText | None = None
    findings: list[Finding] = Field(min_length=1, max_length=200)


class WritebackRequest(WireModel):
    """What an orchestrator writes back (docs/architecture.md#write-back-triggers).

    Any mix of explicit ``memories`` (and ``edges`` between them or to existing
    memories), a ``channelTranscript``, a ``workflowOutput`` and ``diagnostics``.
    """

    idempotency_key: IdempotencyKey | None = None
    #: When the orchestrator published it (set by the publisher): the time a memory was
    #: said, unless it carries its own. Updates compare these, not arrival order.
    requested_at: datetime | None = None
    memories: list[MemoryInput] = Field(default_factory=list)
    edges: list[EdgeInput] = Field(default_factory=list)
    channel_transcript: ChannelTranscript | None = None
    workflow_output: WorkflowOutput | None = None
    diagnostics: Diagnostics | None = None
    #: The events of the step that produced it (execution-log events, checked by
    #: ``execlog.check_step_events``): appended in the write-back's transaction.
    log_events: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("requested_at", mode="before")
    @classmethod
    def _requested_at(cls, value: Any) -> Any:
        return None if value is None else check_timestamp(value)

    @model_validator(mode="after")
    def _not_empty(self) -> WritebackRequest:
        if not (self.memories or self.channel_transcript or self.workflow_output
                or self.diagnostics):
            raise ValueError("nothing to write: give memories, channelTranscript, "
                             "workflowOutput or diagnostics")
        return self

    @field_validator("idempotency_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_key(value)


#: The provenance of a memory written by hand (client or CLI) that names none.
DEFAULT_SOURCE = {"sourceType": "manual", "capturedBy": "user"}


def with_default_sources(memories: Any) -> Any:
    """``memories`` with :data:`DEFAULT_SOURCE` on each one that has no ``source``.

    Anything that is not a list of objects is returned as it is, for validation to
    reject with its field path.
    """
    if not isinstance(memories, list | tuple):
        return memories
    return [{**m, "source": dict(DEFAULT_SOURCE)}
            if isinstance(m, dict) and "source" not in m else m for m in memories]


def check_writeback(payload: Any, workspace: Workspace, *, max_memories: int,
                    max_content_chars: int) -> WritebackRequest:
    """``payload`` as a WritebackRequest, or MemoryValidationError with field paths.

    The one check of a write-back: the client runs it before publishing (so a bad
    write is refused at once) and the worker again at its door.
    """
    memories = payload.get("memories") if isinstance(payload, dict) else None
    if isinstance(memories, list) and len(memories) > max_memories:
        message = (f"memories: {len(memories)} memories in one task; the limit is "
                   f"{max_memories}")
        raise MemoryValidationError(message, [{"path": "memories",
                                               "message": f"at most {max_memories}"}])
    return validate(WritebackRequest, payload, workspace=workspace,
                    max_content_chars=max_content_chars)
