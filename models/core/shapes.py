"""The domain's shapes: memory nodes, edges, provenance, and their rules
(docs/architecture.md#the-memory-model).

This module is the one place where enums, bounds and field rules live. Input is
validated strictly: a wrong type is an error, never coerced (``"50"`` is not an
importance, ``true`` is not a confidence, ``"fact"`` is not a type). The only
transformations are these two: content is normalized plain text
(Unicode NFC, line endings, surrounding blanks) and a file-backed ``sourcePath`` is
made absolute and canonical inside the orchestrator's workspace.

Validate through :func:`validate`, which turns pydantic's errors into
:class:`MemoryValidationError` with camelCase field paths and checks source paths
against the orchestrator's :class:`~orchmem.models.workspace.folders.Workspace`.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, TypeVar

from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from orchmem.config import (
    ORCHESTRATOR_ID_PATTERN,
    MemoryValidationError,
    ScopeViolation,
)
from orchmem.models.core.governance_fields import (
    Metadata,
    Scope,
    Sensitivity,
    Tags,
    Tier,
    scope_error,
)
from orchmem.models.workspace.folders import Workspace, stored_source_path


class MemoryType(StrEnum):
    """A memory's type, matched in any case ("fact") and stored as written here."""

    FACT = "Fact"
    PREFERENCE = "Preference"
    DECISION = "Decision"
    IDENTITY = "Identity"
    EVENT = "Event"
    OBSERVATION = "Observation"
    GOAL = "Goal"
    TODO = "Todo"

    @classmethod
    def _missing_(cls, value: object) -> MemoryType | None:
        """The type whose name ``value`` spells in another case; None for no type."""
        if not isinstance(value, str):
            return None
        folded = value.casefold()
        return next((t for t in cls if t.value.casefold() == folded), None)


class EdgeType(StrEnum):
    RELATED_TO = "RelatedTo"
    UPDATES = "Updates"
    CONTRADICTS = "Contradicts"
    CAUSED_BY = "CausedBy"
    PART_OF = "PartOf"


class Status(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    RETRACTED = "retracted"


class SourceType(StrEnum):
    WORKFLOW_OUTPUT = "workflow_output"
    CHANNEL_TRANSCRIPT = "channel_transcript"
    INGEST_FILE = "ingest_file"
    DIAGNOSTICS = "diagnostics"
    MANUAL = "manual"


class CapturedBy(StrEnum):
    EXTRACTOR = "extractor"
    USER = "user"
    SYSTEM = "system"


#: Source types that are file-backed: they must carry a sourcePath.
FILE_BACKED = frozenset({SourceType.INGEST_FILE})

MAX_CONTENT_CHARS = 8000
MAX_SUMMARY_CHARS = 280
MAX_ID_CHARS = 200
MEMORY_ID_PATTERN = r"^m-[0-9a-f]{8}-[0-9a-f]{16}$"
_MEMORY_ID = re.compile(MEMORY_ID_PATTERN)
#: Characters no plain text field accepts: C0 controls but tab and newlines, DEL, and
#: lone UTF-16 surrogates (JSON can carry them; they cannot be encoded as UTF-8).
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_BLANK_RUN = re.compile(r"[ \t]+")
_MANY_NEWLINES = re.compile(r"\n{3,}")

Importance = Annotated[int, Field(ge=0, le=100, strict=True)]
#: A request's yes/no field: JSON true or false only ("yes", 1 or "true" are refused).
Flag = Annotated[bool, Field(strict=True)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, strict=True, allow_inf_nan=False)]
Weight = Annotated[float, Field(ge=0.0, le=1.0, strict=True, allow_inf_nan=False)]
ShortText = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, strict=True)]


# ---------------------------------------------------------------------------- time


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_ts(value: datetime) -> str:
    """ISO 8601 in UTC with microseconds and ``Z``: sorts as text in SQLite. Raises
    ValueError (not OverflowError, which validators do not turn into a field error) for
    a time whose UTC value falls outside years 1-9999."""
    try:
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except OverflowError:
        raise ValueError(f"{value.isoformat()[:40]} is out of range in UTC") from None


def parse_ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# ---------------------------------------------------------------------------- ids


@functools.lru_cache(maxsize=1024)
def orchestrator_tag(orchestrator_id: str) -> str:
    """Eight hex digits naming the orchestrator inside every id it issues."""
    return hashlib.blake2b(orchestrator_id.encode(), digest_size=4).hexdigest()


def derive_id(prefix: str, orchestrator_id: str, *parts: object) -> str:
    """A stable id: the same orchestrator and parts always give the same id."""
    seed = "\x1f".join(str(p) for p in (orchestrator_id, *parts))
    digest = hashlib.blake2b(seed.encode(), digest_size=8).hexdigest()
    return f"{prefix}-{orchestrator_tag(orchestrator_id)}-{digest}"


def check_memory_id(value: object, orchestrator_id: str, where: str = "memoryId") -> str:
    """Return ``value`` if it is a memoryId issued by ``orchestrator_id``.

    Raises MemoryValidationError for a malformed id and ScopeViolation for an id
    issued by another orchestrator.
    """
    if not isinstance(value, str) or _MEMORY_ID.fullmatch(value) is None:
        message = f"{where}: {repr(value)[:80]} is not a memoryId (m-xxxxxxxx-xxxxxxxxxxxxxxxx)"
        raise MemoryValidationError(message, [{"path": where, "message": message}])
    if value[2:10] != orchestrator_tag(orchestrator_id):
        raise ScopeViolation(
            f"{where} {value} belongs to another orchestrator, not {orchestrator_id!r}"
        )
    return value


# ---------------------------------------------------------------------------- text


def normalize_text(value: str) -> str:
    """Normalized plain text: NFC, ``\\n`` line ends, blanks collapsed, trimmed."""
    text = unicodedata.normalize("NFC", value).replace("\r\n", "\n").replace("\r", "\n")
    lines = [_BLANK_RUN.sub(" ", line).strip() for line in text.split("\n")]
    return _MANY_NEWLINES.sub("\n\n", "\n".join(lines)).strip()


def summarize(content: str, limit: int = 200) -> str:
    """A one-line summary: the first sentence or line of ``content``, at most ``limit`` chars."""
    first = content.split("\n", 1)[0]
    match = re.search(r"(?<=[.!?])\s", first)
    if match and match.start() >= 20:
        first = first[: match.start()]
    if len(first) > limit:
        first = first[: limit - 1].rsplit(" ", 1)[0] + "…"
    return first


def content_fingerprint(memory_type: str, content: str) -> str:
    """Hash of the type and the content with case, punctuation and blanks ignored."""
    folded = unicodedata.normalize("NFKC", content).casefold()
    words = re.findall(r"\w+", folded)
    return hashlib.sha256(f"{memory_type}\x1f{' '.join(words)}".encode()).hexdigest()[:32]


def _checked_text(value: str, field: str, max_chars: int) -> str:
    if CONTROL_CHARS.search(value):
        raise ValueError(f"{field} must be plain text without control characters or NUL bytes")
    text = normalize_text(value)
    if not text:
        raise ValueError(f"{field} must not be empty")
    if len(text) > max_chars:
        raise ValueError(f"{field} has {len(text)} characters; the limit is {max_chars}")
    return text


# ---------------------------------------------------------------------------- models


class WireModel(BaseModel):
    """Base of every shape that crosses a boundary: strict, frozen, camelCase in JSON."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        use_enum_values=False,
        alias_generator=AliasGenerator(alias=to_camel),
        str_strip_whitespace=False,
    )

    def dump(self) -> dict[str, Any]:
        """JSON-ready dict with the spec's camelCase names."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


#: What :func:`format_ts` writes.
_STORED_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", re.ASCII)


def check_timestamp(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("timestamps must carry a time zone (e.g. 2024-05-01T10:00:00Z)")
        format_ts(value)  # in range once in UTC, as it is stored
        return value
    if not isinstance(value, str):
        raise ValueError("timestamps must be ISO 8601 strings with a time zone")
    if _STORED_TS.fullmatch(value):
        # The stored form (format_ts's): UTC, years 1-9999, so in range; fromisoformat
        # checks the calendar (an import reads tens of thousands of them).
        try:
            return datetime.fromisoformat(value[:-1] + "+00:00")
        except ValueError:
            raise ValueError(f"{value[:40]!r} is not an ISO 8601 timestamp") from None
    try:
        parsed = parse_ts(value)
    except ValueError:
        raise ValueError(f"{value[:40]!r} is not an ISO 8601 timestamp") from None
    if parsed.tzinfo is None:
        raise ValueError("timestamps must carry a time zone (e.g. 2024-05-01T10:00:00Z)")
    format_ts(parsed)
    return parsed


class Source(WireModel):
    """Provenance of a memory (docs/architecture.md#provenance-and-audit)."""

    source_type: SourceType
    source_path: str | None = None
    conversation_id: ShortText | None = None
    workflow_run_id: ShortText | None = None
    step_id: ShortText | None = None
    captured_by: CapturedBy

    @field_validator("conversation_id", "workflow_run_id", "step_id")
    @classmethod
    def _plain_id(cls, value: str | None) -> str | None:
        if value is not None and CONTROL_CHARS.search(value):
            raise ValueError("must not contain control characters or NUL bytes")
        return value

    @field_validator("source_path")
    @classmethod
    def _canonical_path(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        workspace = (info.context or {}).get("workspace")
        if (info.context or {}).get("stored"):  # read back: made canonical when written
            return stored_source_path(value)
        if not isinstance(workspace, Workspace):
            raise ValueError("sourcePath can only be checked against an orchestrator's workspace")
        try:
            return workspace.canonical_source_path(value)
        except MemoryValidationError as exc:
            raise ValueError(exc.message.split(": ", 1)[-1]) from None

    @model_validator(mode="after")
    def _file_backed_needs_path(self) -> Source:
        if self.source_type in FILE_BACKED and not self.source_path:
            raise ValueError(f"sourceType {self.source_type.value} requires a sourcePath")
        return self


class MemoryInput(WireModel):
    """A candidate memory, as a write-back or an ingest file gives it."""

    type: MemoryType
    content: Annotated[str, Field(strict=True)]
    summary: Annotated[str, Field(strict=True)] | None = None
    importance: Importance = 50
    confidence: Confidence = 0.8
    source: Source
    created_at: datetime | None = None
    #: A local name, so that edges in the same request can refer to this memory.
    key: ShortText | None = None
    # -- governance (models/core/governance_fields.py): None tier = the type's default,
    # None sensitivity = internal unless the secret detector finds one.
    tier: Tier | None = None
    scope: Scope = Scope.GLOBAL
    session_id: ShortText | None = None
    project_id: ShortText | None = None
    sensitivity: Sensitivity | None = None
    tags: Tags = Field(default_factory=list)
    metadata: Metadata = Field(default_factory=dict)
    #: When it happened or became true (default: when it was said, createdAt), and when
    #: it stopped being true (open when None). See models/core/validity.py.
    valid_from: datetime | None = None
    valid_to: datetime | None = None

    @model_validator(mode="after")
    def _scope_complete(self) -> MemoryInput:
        problem = scope_error(self.scope, self.session_id, self.project_id)
        if problem:
            raise ValueError(problem)
        return self

    @field_validator("created_at", "valid_from", "valid_to", mode="before")
    @classmethod
    def _created_at(cls, value: Any) -> Any:
        return None if value is None else check_timestamp(value)

    @field_validator("valid_to")
    @classmethod
    def _window(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        """validTo may not come before validFrom (or createdAt, when no validFrom)."""
        named = "validFrom" if info.data.get("valid_from") else "createdAt"
        start = info.data.get("valid_from") or info.data.get("created_at")
        if value is not None and start is not None and value < start:
            raise ValueError(f"{value.isoformat()} is before {named} {start.isoformat()}")
        return value

    @field_validator("content")
    @classmethod
    def _content(cls, value: str, info: ValidationInfo) -> str:
        limit = (info.context or {}).get("max_content_chars", MAX_CONTENT_CHARS)
        return _checked_text(value, "content", limit)

    @field_validator("summary")
    @classmethod
    def _summary(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return _checked_text(value, "summary", MAX_SUMMARY_CHARS).replace("\n", " ")

    @property
    def summary_or_default(self) -> str:
        return self.summary or summarize(self.content)


class EdgeInput(WireModel):
    """An edge to create. Ends are memoryIds, or ``key``s of memories in the same request."""

    from_memory_id: ShortText
    to_memory_id: ShortText
    edge_type: EdgeType
    weight: Weight = 1.0
    reason: Annotated[str, Field(strict=True, max_length=500)] | None = None

    @model_validator(mode="after")
    def _no_self_loop(self) -> EdgeInput:
        if self.from_memory_id == self.to_memory_id:
            raise ValueError("an edge must join two different memories")
        return self


class MemoryNode(WireModel):
    """A stored memory, as recall, list and history return it."""

    memory_id: str
    orchestrator_id: Annotated[str, Field(pattern=ORCHESTRATOR_ID_PATTERN)]
    type: MemoryType
    importance: Importance
    content: str
    summary: str
    confidence: Confidence
    source: Source
    status: Status
    #: ISO 8601 UTC (``format_ts``), as stored.
    created_at: str
    updated_at: str
    #: What reflection grouped it under (models/reflection/topics.py); left out of JSON until then.
    topic: str | None = None
    # -- governance
    tier: Tier = Tier.SEMANTIC
    scope: Scope = Scope.GLOBAL
    session_id: str | None = None
    project_id: str | None = None
    sensitivity: Sensitivity = Sensitivity.INTERNAL
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: When it became true (None: since createdAt) and stopped being true (None: still is).
    valid_from: str | None = None
    valid_to: str | None = None
    #: Dated phrases of the content resolved against validFrom (models/language/timeexpr.py).
    time_refs: list[dict[str, str]] | None = None


class MemoryEdge(WireModel):
    """A stored edge."""

    edge_id: str
    from_memory_id: str
    to_memory_id: str
    edge_type: EdgeType
    weight: Weight
    reason: str | None = None
    created_at: str


M = TypeVar("M", bound=BaseModel)


def validate(
    model: type[M],
    data: Any,
    *,
    workspace: Workspace | None = None,
    max_content_chars: int = MAX_CONTENT_CHARS,
    where: str = "",
) -> M:
    """Validate ``data`` as ``model``; raise MemoryValidationError with field paths.

    A sourcePath that leaves ``workspace`` raises ScopeViolation instead: it is an
    access attempt, not a typo.
    """
    context = {"workspace": workspace, "max_content_chars": max_content_chars}
    try:
        return model.model_validate(data, context=context, by_alias=True, by_name=True)
    except ValidationError as exc:
        raise _wrap_errors(exc, where, model.__name__) from None


T = TypeVar("T")


def validate_with(adapter: TypeAdapter[T], data: Any, *, workspace: Workspace | None = None,
                  max_content_chars: int = MAX_CONTENT_CHARS, where: str = "",
                  name: str = "payload") -> T:
    """Like :func:`validate`, for a TypeAdapter (e.g. a discriminated union)."""
    context = {"workspace": workspace, "max_content_chars": max_content_chars}
    try:
        return adapter.validate_python(data, context=context, by_alias=True, by_name=True)
    except ValidationError as exc:
        raise _wrap_errors(exc, where, name) from None


def _wrap_errors(exc: ValidationError, where: str, name: str) -> MemoryValidationError:
    errors = [{"path": _path(where, err["loc"]), "message": _message(err)} for err in exc.errors()]
    summary = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5])
    more = f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""
    return MemoryValidationError(f"invalid {name}: {summary}{more}", errors)


def _path(prefix: str, loc: tuple[Any, ...]) -> str:
    parts = [prefix] if prefix else []
    parts += [str(p) for p in loc]
    return ".".join(parts) or "(root)"


def _message(err: Any) -> str:
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        return "unknown field"
    value = err.get("input")
    if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 40):
        return f"{message} (got {value!r})"
    return message


__all__ = [
    "FILE_BACKED",
    "MEMORY_ID_PATTERN",
    "CapturedBy",
    "EdgeInput",
    "EdgeType",
    "MemoryEdge",
    "MemoryInput",
    "MemoryNode",
    "MemoryType",
    "Source",
    "SourceType",
    "Status",
    "check_memory_id",
    "content_fingerprint",
    "derive_id",
    "format_ts",
    "normalize_text",
    "orchestrator_tag",
    "parse_ts",
    "summarize",
    "utc_now",
    "validate",
]
