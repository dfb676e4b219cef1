"""Request bodies of the HTTP API that are not task payloads (those are in
``orchmem.models.core.payloads``): the edits as ``MemoryClient`` exposes them, and context.

camelCase in JSON, unknown fields refused, like every shape that crosses a boundary.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from orchmem.models.core.shapes import EdgeType, Flag, ShortText, WireModel

Reason = Annotated[str, Field(strict=True, min_length=1, max_length=500)]
Query = Annotated[str, Field(strict=True, max_length=100_000)]


class SupersedeBody(WireModel):
    """Replace ``memoryId`` by an existing memory (``by``) or by new ``content``."""

    memory_id: ShortText
    by: ShortText | None = None
    content: Annotated[str, Field(strict=True, min_length=1, max_length=100_000)] | None = None
    reason: Reason | None = None


class RetractBody(WireModel):
    """Withdraw ``memoryId``: kept for the audit trail, left out of recall."""

    memory_id: ShortText
    reason: Reason


class LinkBody(WireModel):
    """Add an edge ``fromMemoryId -> toMemoryId``."""

    from_memory_id: ShortText
    to_memory_id: ShortText
    edge_type: EdgeType
    weight: Annotated[float, Field(ge=0.0, le=1.0)] = 1.0
    reason: Reason | None = None


class ForgetBody(WireModel):
    """Forget ``memoryId``: soft (retracted) by default, ``hard`` erases its text."""

    memory_id: ShortText
    hard: Flag = False
    reason: Reason | None = None


class RecoverBody(WireModel):
    """Make the soft-forgotten (retracted) ``memoryId`` active again."""

    memory_id: ShortText
    reason: Reason | None = None


class ContextBody(WireModel):
    """The prompt block for ``purpose`` and ``query``."""

    purpose: Literal["selector", "step", "diagnostics"]
    query: Query
    # -- the request's scope view, the block's format and budget
    session_id: ShortText | None = None
    project_id: ShortText | None = None
    format: Literal["orchmem", "relevant-memory"] = "orchmem"
    max_chars: Annotated[int, Field(ge=1, le=200_000, strict=True)] | None = None
    max_tokens: Annotated[int, Field(ge=1, le=100_000, strict=True)] | None = None
    #: The episodic tier: True adds it, False keeps it out, None lets the router decide.
    episodic: Annotated[bool, Field(strict=True)] | None = None


#: Every request body model, for the OpenAPI document's components.
BODY_MODELS = (SupersedeBody, RetractBody, LinkBody, ForgetBody, RecoverBody,
               ContextBody)
