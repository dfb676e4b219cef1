"""Governance vocabulary of a memory: tier, scope, sensitivity, tags and metadata.

- **tier**: ``profile`` (durable traits), ``semantic`` (normalized knowledge),
  ``episodic`` (timestamped, source-linked events) or ``procedural`` (how to work).
  A memory that names none takes :data:`TIER_OF_TYPE` of its type.
- **scope**: ``global`` (default: seen by every conversation), ``project`` (needs a
  ``projectId``) or ``session`` (needs a ``sessionId``).
- **sensitivity**: ``public``, ``internal`` (default), ``confidential``, ``restricted``.
- **tags**: at most :data:`MAX_TAGS` short labels; **metadata**: a JSON object of at
  most :data:`MAX_METADATA_BYTES` bytes as compact JSON.

This module holds the values and their checks only; :mod:`.shapes` puts the fields on
the wire models and :mod:`orchmem.models.storage.visibility` turns a request's view
into SQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, Field


class Tier(StrEnum):
    PROFILE = "profile"
    SEMANTIC = "semantic"
    EPISODIC = "episodic"
    PROCEDURAL = "procedural"


class Scope(StrEnum):
    GLOBAL = "global"
    PROJECT = "project"
    SESSION = "session"


class Sensitivity(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"


#: The tier a memory of each type takes when it names none
#: (docs/concepts/governance.md#fields).
TIER_OF_TYPE: dict[str, Tier] = {
    "Identity": Tier.PROFILE, "Preference": Tier.PROFILE,
    "Fact": Tier.SEMANTIC, "Decision": Tier.SEMANTIC, "Goal": Tier.SEMANTIC,
    "Todo": Tier.SEMANTIC,
    "Event": Tier.EPISODIC, "Observation": Tier.EPISODIC,
}

MAX_TAGS = 20
MAX_TAG_CHARS = 50
MAX_METADATA_BYTES = 2048
_TAG = re.compile(r"^[\w][\w.:/+-]*$")


def tier_of(memory_type: str, tier: Tier | str | None) -> Tier:
    """The explicit ``tier`` if given, else the default of ``memory_type``."""
    return Tier(tier) if tier is not None else TIER_OF_TYPE[memory_type]


def check_tags(values: list[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        if _TAG.fullmatch(value) is None:
            raise ValueError(f"tag {value[:60]!r} must be letters, digits and _ . : / + - "
                             "(no blanks), starting with a letter or digit")
        if value not in out:
            out.append(value)
    return out


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata must be plain JSON ({exc})") from None
    size = len(text.encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}")
    return value


Tag = Annotated[str, Field(strict=True, min_length=1, max_length=MAX_TAG_CHARS)]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS), AfterValidator(check_tags)]
Metadata = Annotated[dict[str, Any], AfterValidator(check_metadata)]


def scope_error(scope: Scope, session_id: str | None, project_id: str | None) -> str | None:
    """Why this scope is incomplete (a session scope without its sessionId...), or None."""
    if scope == Scope.SESSION and not session_id:
        return "scope session requires a sessionId"
    if scope == Scope.PROJECT and not project_id:
        return "scope project requires a projectId"
    return None


def tags_json(tags: Sequence[str]) -> str:
    return json.dumps(list(tags), ensure_ascii=False)


def metadata_json(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


__all__ = ["MAX_METADATA_BYTES", "MAX_TAGS", "TIER_OF_TYPE", "Metadata", "Scope",
           "Sensitivity", "Tags", "Tier", "check_metadata", "check_tags", "metadata_json",
           "scope_error", "tags_json", "tier_of"]
