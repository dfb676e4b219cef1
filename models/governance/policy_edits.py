"""The governance edits: ``patch``, ``invalidate`` and ``forget_policy``.

- ``patch`` changes importance, confidence, summary, tags, tier, scope (with its
  sessionId / projectId) or sensitivity in place; the audit event keeps the fields'
  values before and after. A change of content is a supersede, never a patch.
- ``invalidate``: the record was wrong (as opposed to a user taking it back). It is a
  retract with a reason, audited as its own op ``invalidate``; recall, the bulletin
  and context leave it out like any retracted memory (docs/concepts/governance.md#edits).
- ``forget_policy``: forget every memory a
  :class:`~orchmem.models.storage.memories.selection.Selector`
  matches, soft or hard, or with ``dryRun`` only say which (``{"count", "memoryIds"}``).
  Its application lives in :mod:`.edits` (it forgets each memory as ``forget`` does).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from orchmem.config import MemoryValidationError
from orchmem.models.core.governance_fields import (
    Metadata,
    Scope,
    Sensitivity,
    Tags,
    Tier,
    metadata_json,
    scope_error,
    tags_json,
    tier_of,
)
from orchmem.models.core.payloads import IdempotencyKey
from orchmem.models.core.shapes import (
    Confidence,
    Flag,
    Importance,
    ShortText,
    Status,
    WireModel,
    check_timestamp,
    format_ts,
)
from orchmem.models.storage.memories.events import add_event
from orchmem.models.storage.memories.governed import mark_retracted, set_fields, stored_fields
from orchmem.models.storage.memories.rows import StoredMemory
from orchmem.models.storage.memories.selection import Selector
from orchmem.models.workspace.folders import Workspace

Reason = Annotated[str, Field(strict=True, min_length=1, max_length=500)]
Actor = Literal["user", "system", "extractor"]
MAX_POLICY_IDS = 10_000


class _GovernanceEdit(WireModel):
    idempotency_key: IdempotencyKey | None = None
    actor: Actor = "user"
    wait_for_memory_s: Annotated[int, Field(ge=0, le=86_400, strict=True)] | None = None


#: The fields a patch may change, as MemoryRow columns.
PATCH_FIELDS = ("importance", "confidence", "summary", "tags", "tier", "scope", "session_id",
                "project_id", "sensitivity", "metadata")


class Patch(_GovernanceEdit):
    op: Literal["patch"]
    memory_id: ShortText
    importance: Importance | None = None
    confidence: Confidence | None = None
    summary: Annotated[str, Field(strict=True, min_length=1, max_length=280)] | None = None
    tags: Tags | None = None
    metadata: Metadata | None = None
    tier: Tier | None = None
    scope: Scope | None = None
    session_id: ShortText | None = None
    project_id: ShortText | None = None
    sensitivity: Sensitivity | None = None
    reason: Reason | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_content(cls, data: Any) -> Any:
        if isinstance(data, dict) and "content" in data:
            raise ValueError("content cannot be patched: a change of content is a supersede")
        return data

    @model_validator(mode="after")
    def _something(self) -> Patch:
        if not self.changes():
            raise ValueError(f"a patch changes at least one of {', '.join(PATCH_FIELDS)}")
        return self

    def changes(self) -> dict[str, Any]:
        """The columns this patch sets, as stored values."""
        out: dict[str, Any] = {}
        for name in PATCH_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "tags":
                value = tags_json(value)
            elif name == "metadata":
                value = metadata_json(value)
            out[name] = getattr(value, "value", value)
        return out


class Invalidate(_GovernanceEdit):
    op: Literal["invalidate"]
    memory_id: ShortText
    reason: Reason


def _cutoff(value: Any) -> Any:
    """A date (``2026-01-31``, midnight UTC) or an ISO 8601 timestamp with a time zone."""
    if isinstance(value, str) and len(value) == 10:
        try:
            return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            raise ValueError(f"{value!r} is not a date (YYYY-MM-DD) or ISO 8601 timestamp") \
                from None
    return check_timestamp(value)


class ForgetPolicy(_GovernanceEdit):
    op: Literal["forget_policy"]
    memory_ids: list[ShortText] = Field(default_factory=list, max_length=MAX_POLICY_IDS)
    before: datetime | None = None
    session_id: ShortText | None = None
    project_id: ShortText | None = None
    conversation_id: ShortText | None = None
    workflow_run_id: ShortText | None = None
    source_path: Annotated[str, Field(strict=True, min_length=1, max_length=4096)] | None = None
    tags: Tags = Field(default_factory=list)
    tiers: list[Tier] = Field(default_factory=list, max_length=len(Tier))
    scope: Scope | None = None
    hard: Flag = False
    dry_run: Flag = False
    reason: Reason | None = None

    @field_validator("before", mode="before")
    @classmethod
    def _before(cls, value: Any) -> Any:
        return None if value is None else _cutoff(value)

    @model_validator(mode="after")
    def _some_selector(self) -> ForgetPolicy:
        if self.selector(None).empty():
            raise ValueError("give at least one selector: memoryIds, before, sessionId, "
                             "projectId, conversationId, workflowRunId, sourcePath, tags, tiers "
                             "or scope")
        return self

    def selector(self, workspace: Workspace | None) -> Selector:
        path = self.source_path
        if path is not None and workspace is not None:
            # a relative path names a file as it was dropped into memory/ingest/
            if not os.path.isabs(path):
                path = str(workspace.ingest_dir / path)
            path = workspace.canonical_source_path(path, where="sourcePath")
        return Selector(memory_ids=tuple(self.memory_ids),
                        before=format_ts(self.before) if self.before else None,
                        session_id=self.session_id, project_id=self.project_id,
                        conversation_id=self.conversation_id,
                        workflow_run_id=self.workflow_run_id, source_path=path,
                        tags=tuple(self.tags), tiers=tuple(t.value for t in self.tiers),
                        scope=self.scope.value if self.scope else None)


def apply_patch(stored: StoredMemory, edit: Patch, key: str) -> dict[str, Any]:
    """Patch ``stored`` in place and audit the fields' before and after (inside a write
    transaction). Raises MemoryValidationError when the result has an incomplete scope."""
    changes = edit.changes()
    row = stored_fields(stored.memory_id, sorted({*changes, "scope", "session_id",
                                                   "project_id"}))
    scope = Scope(changes.get("scope", row["scope"]))
    problem = scope_error(scope, changes.get("session_id", row["session_id"]),
                          changes.get("project_id", row["project_id"]))
    if problem:
        raise MemoryValidationError(f"scope: {problem}", [{"path": "scope", "message": problem}])
    if "tier" in changes:
        changes["tier"] = tier_of(row["type"], changes["tier"]).value
    before = {name: row[name] for name in changes}
    set_fields(stored.memory_id, changes)
    add_event("patch", [stored.memory_id], before=before, after=changes, reason=edit.reason,
              actor=edit.actor, key=key)
    return {"memoryIds": [stored.memory_id], "fields": sorted(changes)}


def apply_invalidate(stored: StoredMemory, edit: Invalidate, key: str) -> dict[str, Any]:
    """Mark ``stored`` wrong: retracted, audited as ``invalidate`` with its reason."""
    mark_retracted(stored.memory_id)
    add_event("invalidate", [stored.memory_id], before={"status": stored.status},
              after={"status": Status.RETRACTED.value, "invalidated": True},
              reason=edit.reason, actor=edit.actor, key=key)
    return {"memoryIds": [stored.memory_id], "status": Status.RETRACTED.value}
