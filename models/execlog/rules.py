"""The execution log's shapes and rules (seed 003): what a run appends.

The log is the authoritative record of what an orchestrator's agents did: runs,
steps, tool calls, prompts and responses (a SHA-256 digest, plus the text when the
caller keeps it and it fits ``memory.log.max_text_chars``), outcomes, checkpoints
(a pointer to serialized state, that state's schema version and the parent
checkpoint) and the replay-mode flag of a run. Memories, their vectors and episodes
are projections of it.

- A run id is issued by its orchestrator (``r-<orchestrator tag>-<16 hex>``, like a
  memoryId): a run id of another orchestrator is refused as a scope violation.
- Every event has an idempotency key (given, or ``<request key>#<position>``); its
  eventId is derived from that key, so replaying an event appends nothing.
- Every event records :data:`LOG_SCHEMA_VERSION`; a checkpoint's state schema must be
  one of ``memory.log.checkpoint_schema_versions``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from datetime import datetime
from typing import Annotated, Any, Literal, NoReturn

from pydantic import Field, field_validator, model_validator

from orchmem.config import MemoryValidationError, ScopeViolation
from orchmem.config.memory_settings import ExecLogSettings
from orchmem.models.core.payloads import IdempotencyKey, check_key
from orchmem.models.core.shapes import (
    CONTROL_CHARS,
    Flag,
    ShortText,
    WireModel,
    check_timestamp,
    derive_id,
    orchestrator_tag,
    validate,
)

#: The version of a log event's and a run's shape, stored on every row.
LOG_SCHEMA_VERSION = 1
RUN_ID_PATTERN = r"^r-[0-9a-f]{8}-[0-9a-f]{16}$"
_RUN_ID = re.compile(RUN_ID_PATTERN)
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_EVENT_ID = re.compile(r"^e-[0-9a-f]{8}-[0-9a-f]{16}$")
MAX_EVENTS_PER_TASK = 500
#: Longest text accepted at the door; the stored bound is memory.log.max_text_chars.
_MAX_TEXT = 100_000

EventKind = Literal["run_start", "run_end", "step_start", "step_end", "tool_call",
                    "tool_result", "prompt", "response", "outcome", "checkpoint", "note",
                    "replay_mode", "compensation"]


def new_run_id(orchestrator_id: str) -> str:
    """A fresh run id issued by ``orchestrator_id``."""
    return f"r-{orchestrator_tag(orchestrator_id)}-{secrets.token_hex(8)}"


def event_id_for(orchestrator_id: str, event_key: str) -> str:
    """The eventId of the event whose idempotency key is ``event_key``."""
    return derive_id("e", orchestrator_id, event_key)


def check_run_id(value: object, orchestrator_id: str, where: str = "runId") -> str:
    """``value`` if it is a run id issued by ``orchestrator_id``; MemoryValidationError
    for a malformed one, ScopeViolation for another orchestrator's."""
    if not isinstance(value, str) or _RUN_ID.fullmatch(value) is None:
        message = (f"{where}: {repr(value)[:80]} is not a run id (r-xxxxxxxx-xxxxxxxxxxxxxxxx, "
                   "as memory.run() issues)")
        raise MemoryValidationError(message, [{"path": where, "message": message}])
    if value[2:10] != orchestrator_tag(orchestrator_id):
        raise ScopeViolation(f"{where} {value} belongs to another orchestrator, "
                             f"not {orchestrator_id!r}")
    return value


def first_sentence_of(text: str, limit: int = 500) -> str:
    """The first line of ``text``, at most ``limit`` characters, control characters out."""
    line = CONTROL_CHARS.sub(" ", (text.strip().splitlines() or [""])[0])
    return line[:limit] or "-"


def check_event_id(value: str, orchestrator_id: str, where: str) -> str:
    """``value`` if it is an eventId of ``orchestrator_id``'s log (a parent checkpoint)."""
    if _EVENT_ID.fullmatch(value) is None:
        _refuse(where, f"{value[:80]!r} is not an eventId (e-xxxxxxxx-xxxxxxxxxxxxxxxx)")
    if value[2:10] != orchestrator_tag(orchestrator_id):
        raise ScopeViolation(f"{where} {value} belongs to another orchestrator, "
                             f"not {orchestrator_id!r}")
    return value


#: Most tool names on one replay allowlist.
MAX_ALLOWLIST = 200


def check_allowlist(value: object, where: str = "allowlist") -> list[str] | None:
    """A replay allowlist: None, or a list of tool names (plain text, 1-200 characters
    each); MemoryValidationError naming ``where`` (or ``where.<n>``) otherwise."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple | set | frozenset):
        _refuse(where, f"must be a list of tool names, not {type(value).__name__}")
    names = list(value)
    if len(names) > MAX_ALLOWLIST:
        _refuse(where, f"{len(names)} names; at most {MAX_ALLOWLIST}")
    for position, name in enumerate(names):
        if not isinstance(name, str) or not 1 <= len(name.strip()) <= 200 \
                or CONTROL_CHARS.search(name):
            _refuse(f"{where}.{position}", "must be a tool name: plain text of 1-200 "
                    f"characters, not {type(name).__name__}")
    return names


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


class CheckpointRef(WireModel):
    """A pointer to serialized state (a path, a URL, a key), never the state itself."""

    ref: Annotated[str, Field(strict=True, min_length=1, max_length=2000)]
    schema_version: Annotated[int, Field(strict=True, ge=1)]
    parent_id: ShortText | None = None


class LogEventInput(WireModel):
    run_id: Annotated[str, Field(strict=True)]
    kind: EventKind
    idempotency_key: IdempotencyKey | None = None
    step_id: ShortText | None = None
    span_id: ShortText | None = None
    parent_id: ShortText | None = None
    name: ShortText | None = None
    status: ShortText | None = None
    actor: ShortText | None = None
    text: Annotated[str, Field(strict=True, max_length=_MAX_TEXT)] | None = None
    digest: Annotated[str, Field(strict=True)] | None = None
    data: dict[str, Any] | None = None
    checkpoint: CheckpointRef | None = None
    replay: Flag = False
    at: datetime | None = None

    @field_validator("at", mode="before")
    @classmethod
    def _at(cls, value: Any) -> Any:
        return None if value is None else check_timestamp(value)

    @field_validator("text", "step_id", "span_id", "parent_id", "name", "status", "actor")
    @classmethod
    def _plain(cls, value: str | None) -> str | None:
        if value is not None and CONTROL_CHARS.search(value):
            raise ValueError("must be plain text without control characters or NUL bytes")
        return value

    @field_validator("digest")
    @classmethod
    def _digest(cls, value: str | None) -> str | None:
        if value is not None and _DIGEST.fullmatch(value) is None:
            raise ValueError("must be a SHA-256 digest: 64 lower-case hex digits")
        return value

    @field_validator("idempotency_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_key(value)

    @model_validator(mode="after")
    def _checkpoint(self) -> LogEventInput:
        if (self.kind == "checkpoint") != (self.checkpoint is not None):
            raise ValueError("a checkpoint event needs `checkpoint` (ref, schemaVersion), "
                             "and only a checkpoint event may have one")
        return self


class LogRequest(WireModel):
    """The payload of the log task: events of one orchestrator, appended in order."""

    idempotency_key: IdempotencyKey | None = None
    requested_at: datetime | None = None
    events: list[LogEventInput] = Field(min_length=1, max_length=MAX_EVENTS_PER_TASK)

    @field_validator("requested_at", mode="before")
    @classmethod
    def _requested_at(cls, value: Any) -> Any:
        return None if value is None else check_timestamp(value)


def check_log_request(payload: Any, orchestrator_id: str,
                      limits: ExecLogSettings) -> LogRequest:
    """``payload`` as a LogRequest whose run ids, texts, data and checkpoints this
    orchestrator accepts; MemoryValidationError naming the field (ScopeViolation for a
    run id of another orchestrator). The client runs it before publishing, the worker
    again at its door."""
    request = validate(LogRequest, payload)
    for position, event in enumerate(request.events):
        where = f"events.{position}"
        check_run_id(event.run_id, orchestrator_id, f"{where}.runId")
        if event.text is not None and len(event.text) > limits.max_text_chars:
            _refuse(f"{where}.text", f"{len(event.text)} characters; the limit is "
                    f"memory.log.max_text_chars ({limits.max_text_chars}): log its digest "
                    "and keep the text elsewhere")
        if event.data is not None:
            try:
                size = len(json.dumps(event.data, ensure_ascii=False, allow_nan=False))
            except (TypeError, ValueError) as exc:
                _refuse(f"{where}.data", f"not plain JSON ({exc})")
            if size > limits.max_data_chars:
                _refuse(f"{where}.data", f"{size} characters of JSON; the limit is "
                        f"memory.log.max_data_chars ({limits.max_data_chars})")
        if event.kind == "replay_mode" and event.data is not None:
            check_allowlist(event.data.get("allowlist"), f"{where}.data.allowlist")
        checkpoint = event.checkpoint
        if checkpoint is not None and checkpoint.parent_id is not None:
            check_event_id(checkpoint.parent_id, orchestrator_id,
                           f"{where}.checkpoint.parentId")
        if checkpoint is not None and \
                checkpoint.schema_version not in limits.checkpoint_schema_versions:
            _refuse(f"{where}.checkpoint.schemaVersion",
                    f"unknown checkpoint schema version {checkpoint.schema_version}; this "
                    f"orchestrator restores {sorted(limits.checkpoint_schema_versions)} "
                    "(memory.log.checkpoint_schema_versions)")
    return request


def check_step_events(events: Any, orchestrator_id: str, limits: ExecLogSettings
                      ) -> list[LogEventInput]:
    """A write-back's ``logEvents`` (its step's events) checked as a log request's
    events; MemoryValidationError naming ``logEvents.<n>.<field>``, ScopeViolation for
    a run id of another orchestrator. Empty when there are none."""
    if events is None or events == []:
        return []
    try:
        return list(check_log_request({"events": events}, orchestrator_id, limits).events)
    except MemoryValidationError as exc:
        errors = [{**e, "path": "logEvents" + str(e.get("path", ""))[len("events"):]}
                  for e in exc.errors]
        raise MemoryValidationError(exc.message.replace("events", "logEvents", 1),
                                    errors) from None


def _refuse(path: str, message: str) -> NoReturn:
    text = f"{path}: {message}"
    raise MemoryValidationError(text, [{"path": path, "message": message}])
