"""Explicit edits: supersede, retract, link, forget (soft or hard), recover. Each one
transaction.

Memory changes only through these (and write-back reconciliation), each recorded as a
``memory_events`` row with before/after, reason, actor and idempotency key, and each
idempotent by its key like every write.

``recover`` makes a retracted memory (a soft forget, a retract, an invalidate) active
again, audited with its actor and reason; a hard-forgotten memory has nothing left to
bring back and is refused with :class:`MemoryErased` (code ``erased``).

A hard forget empties the memory's row and runs every entry of the registry of what is
derived from memories (:mod:`.derived`): in the transaction for memory.db, after the
commit for the files, the WAL and the outbox (also on a redelivery). A tombstone event
records the forget, without the content: its reason keeps none of the memory's words
(they become ``[…]``). The result says what went: ``{"erased": {"deadLetters": n,
"files": [paths], "logEvents": n, "logSnapshots": n, "episodes": n, "working": …}}``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from orchmem.config import MemoryErased, MemoryNotFound, MemoryValidationError
from orchmem.models.core.payloads import IdempotencyKey
from orchmem.models.core.shapes import (
    EdgeInput,
    EdgeType,
    Flag,
    MemoryInput,
    MemoryType,
    ShortText,
    Status,
    Weight,
    WireModel,
    check_memory_id,
    content_fingerprint,
    derive_id,
    format_ts,
    utc_now,
    validate,
)
from orchmem.models.governance import derived, log_forget
from orchmem.models.governance.policy_edits import (
    ForgetPolicy,
    Invalidate,
    Patch,
    apply_invalidate,
    apply_patch,
)
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery import receipts
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.memories.edges import insert_edge
from orchmem.models.storage.memories.events import add_event
from orchmem.models.storage.memories.rows import StoredMemory, insert_memory, set_status
from orchmem.models.storage.memories.selection import select

_WORD = re.compile(r"\w+")
Reason = Annotated[str, Field(strict=True, min_length=1, max_length=500)]
Actor = Literal["user", "system", "extractor"]


class _Edit(WireModel):
    idempotency_key: IdempotencyKey | None = None
    actor: Actor = "user"
    #: How long to wait for a memory this edit names that does not exist yet (its
    #: write-back may still be in flight); default ``worker.edit_wait_s``, 0 = fail at once.
    wait_for_memory_s: Annotated[int, Field(ge=0, le=86_400, strict=True)] | None = None


class Supersede(_Edit):
    """``memoryId`` is replaced by ``by`` (an existing memory) or by new ``content``."""

    op: Literal["supersede"]
    memory_id: ShortText
    by: ShortText | None = None
    content: Annotated[str, Field(strict=True)] | None = None
    type: MemoryType | None = None
    reason: Reason | None = None


class Retract(_Edit):
    op: Literal["retract"]
    memory_id: ShortText
    reason: Reason


class Link(_Edit):
    op: Literal["link"]
    from_memory_id: ShortText
    to_memory_id: ShortText
    edge_type: EdgeType
    weight: Weight = 1.0
    reason: Reason | None = None


class Forget(_Edit):
    op: Literal["forget"]
    memory_id: ShortText
    hard: Flag = False
    reason: Reason | None = None


class Recover(_Edit):
    """Make the retracted (soft-forgotten) ``memoryId`` active again."""

    op: Literal["recover"]
    memory_id: ShortText
    reason: Reason | None = None


AnyEdit = Supersede | Retract | Link | Forget | Recover | Patch | Invalidate | ForgetPolicy
Edit = Annotated[AnyEdit, Field(discriminator="op")]
EDIT_ADAPTER: TypeAdapter[AnyEdit] = TypeAdapter(Edit)


def _stored(odb: OrchestratorDB, memory_id: str, where: str) -> StoredMemory:
    check_memory_id(memory_id, odb.orchestrator_id, where=where)
    stored = memories.get(memory_id)
    if stored is None:
        raise MemoryNotFound(f"{where} {memory_id} is not a memory of {odb.orchestrator_id!r}")
    return stored


def _done(key: str) -> dict[str, Any] | None:
    stored = receipts.final_result_in_transaction(key)
    return None if stored is None or undone(stored) else {**stored, "duplicate": True}


def undone(result: dict[str, Any]) -> bool:
    """Whether the same edit delivered again is a new request, not a duplicate (inside a
    bound block): its memory went back since (forget, recover, forget: the second forget
    is the same payload as the first), or it was refused then (the state it was refused
    for may have changed; a refusal that still holds is given again)."""
    if result.get("ok") is False:  # not a dead letter: that one crashed its worker
        error = result.get("error")
        return isinstance(error, dict) and error.get("error") != "dead_letter"
    ids = result.get("memoryIds") or []
    stored = memories.get(ids[0]) if ids and isinstance(ids[0], str) else None
    if stored is None or stored.forgotten:
        return False
    if result.get("op") in ("forget", "retract", "invalidate") and not result.get("hard"):
        return stored.status == Status.ACTIVE.value
    if result.get("op") == "recover":
        return stored.status == Status.RETRACTED.value
    return False


def apply_edit(odb: OrchestratorDB, edit: AnyEdit, *, key: str,
               task: str) -> dict[str, Any]:
    """Apply one edit with its receipt, in one transaction; returns the task result.

    Raises MemoryNotFound, ScopeViolation (another orchestrator's id) or
    MemoryValidationError (e.g. retracting an already retracted memory).
    """
    with odb.write():
        stored = _done(key)
        if stored is None:
            if isinstance(edit, Supersede):
                result = _supersede(odb, edit, key)
            elif isinstance(edit, Retract):
                result = _retract(odb, edit, key)
            elif isinstance(edit, Link):
                result = _link(odb, edit, key)
            elif isinstance(edit, Recover):
                result = _recover(odb, edit, key)
            elif isinstance(edit, Patch | Invalidate | ForgetPolicy):
                result = _governance(odb, edit, key)
            else:
                result = _forget(odb, edit, key)
            result = {"ok": True, "task": task, "op": edit.op,
                      "orchestratorId": odb.orchestrator_id, "idempotencyKey": key, **result}
            receipts.finish(key, receipts.DONE, result)
    done = stored if stored is not None else {**result, "duplicate": False}
    if erases(edit):
        # Also on a redelivery: the first delivery may have died before these ran.
        erased = done.get("erased", {})
        done = {**done, "erased": {**erased, **derived.after_commit(odb, erased)}}
    return done


def erases(edit: AnyEdit) -> bool:
    """True when ``edit`` is a hard forget (by id, or by policy and not a dry run)."""
    return (isinstance(edit, Forget) and edit.hard) or (
        isinstance(edit, ForgetPolicy) and edit.hard and not edit.dry_run)


def _governance(odb: OrchestratorDB, edit: Patch | Invalidate | ForgetPolicy,
                key: str) -> dict[str, Any]:
    """patch, invalidate, forget_policy (models/governance/policy_edits.py)."""
    if isinstance(edit, ForgetPolicy):
        return _forget_policy(odb, edit, key)
    stored = _stored(odb, edit.memory_id, "memoryId")
    if stored.forgotten:
        raise MemoryValidationError(f"{stored.memory_id} is forgotten")
    if isinstance(edit, Invalidate):
        _active(stored, "invalidate")
        result = apply_invalidate(stored, edit, key)
    else:
        result = apply_patch(stored, edit, key)
    odb.log.write(edit.op, memoryId=stored.memory_id, fields=result.get("fields"),
                  reasonChars=len(edit.reason or ""), actor=edit.actor, key=key)
    return result


def _forget_policy(odb: OrchestratorDB, edit: ForgetPolicy, key: str) -> dict[str, Any]:
    """Forget what ``edit``'s selector matches, one ``forget`` (and its audit event) per
    memory; a dry run only lists them."""
    for position, memory_id in enumerate(edit.memory_ids):
        check_memory_id(memory_id, odb.orchestrator_id, where=f"memoryIds.{position}")
        if not memories.exists(memory_id):  # a named memory must be one
            raise MemoryNotFound(f"memoryIds.{position} {memory_id} is not a memory of "
                                 f"{odb.orchestrator_id!r}")
    ids = select(odb, edit.selector(odb.workspace), hard=edit.hard)
    # the audit says how each memory was chosen: named, or matched by the policy
    reason = edit.reason or ("forgotten by id" if edit.memory_ids else "forgotten by policy")
    result: dict[str, Any] = {"count": len(ids), "memoryIds": ids, "hard": edit.hard,
                              "dryRun": edit.dry_run}
    if edit.dry_run or not (ids or edit.hard):
        return result
    erased: dict[str, Any] = {"deadLetters": 0, "files": [], "logEvents": 0, "episodes": 0,
                              "archivedEvents": 0, "logSnapshots": 0}
    for memory_id in ids:
        one = _forget(odb, Forget(op="forget", memory_id=memory_id, hard=edit.hard,
                                  reason=reason,
                                  actor=edit.actor), key)
        for name, value in one.get("erased", {}).items():
            erased[name] += value
    if edit.hard:
        # the run's (the conversation's runs') own log texts go too, matched or not
        logged = log_forget.forget_runs(odb, edit.workflow_run_id, edit.conversation_id,
                                         format_ts(utc_now()))
        erased["logEvents"] += logged["events"]
        erased["episodes"] += logged["episodes"]
        erased["archivedEvents"] += log_forget.forget_archived_runs(
            odb, edit.workflow_run_id, edit.conversation_id)
    # each memory's forget is its own audit event; memory.log gets the policy's count
    odb.log.write("forget_policy", count=len(ids), hard=edit.hard, actor=edit.actor, key=key)
    return {**result, **({"erased": erased} if edit.hard else {})}


def _active(stored: StoredMemory, op: str) -> None:
    if stored.status != Status.ACTIVE.value:
        raise MemoryValidationError(
            f"cannot {op} {stored.memory_id}: it is {stored.status}, not active",
            [{"path": "memoryId", "message": f"memory is {stored.status}"}])


def _supersede(odb: OrchestratorDB, edit: Supersede, key: str) -> dict[str, Any]:
    old = _stored(odb, edit.memory_id, "memoryId")
    _active(old, "supersede")
    if (edit.by is None) == (edit.content is None):
        raise MemoryValidationError("supersede needs exactly one of 'by' (a memoryId) or "
                                    "'content' (the new memory's text)")
    if edit.by is not None:
        new = _stored(odb, edit.by, "by")
        if new.memory_id == old.memory_id:
            raise MemoryValidationError("a memory cannot supersede itself")
        new_id = new.memory_id
    else:
        memory = validate(MemoryInput, {
            "type": (edit.type or MemoryType(old.type)).value, "content": edit.content,
            "importance": old.importance, "confidence": 1.0 if edit.actor == "user" else 0.8,
            "source": {"sourceType": "manual", "capturedBy": edit.actor}},
            workspace=odb.workspace, max_content_chars=odb.memory.writeback.max_content_chars)
        new_id = derive_id("m", odb.orchestrator_id, key, 0)
        insert_memory(new_id, memory, key=key, subject=old.subject,
                      value=None, stated=edit.actor == "user",
                      fingerprint=content_fingerprint(memory.type.value, memory.content))
        add_event("create", [new_id], after={"type": memory.type.value, "replaces": old.memory_id},
                  actor=edit.actor, key=key)
    set_status(old, Status.SUPERSEDED, reason=edit.reason, actor=edit.actor, key=key, by=new_id)
    edge_id = insert_edge(odb, EdgeInput(from_memory_id=new_id, to_memory_id=old.memory_id,
                                         edge_type=EdgeType.UPDATES, weight=1.0,
                                         reason=edit.reason),
                          from_id=new_id, to_id=old.memory_id, key=key, actor=edit.actor)
    # A reason is the user's text and may quote the memory: memory.log gets its length.
    odb.log.write("supersede", memoryId=old.memory_id, by=new_id,
                  reasonChars=len(edit.reason or ""), actor=edit.actor, key=key)
    return {"memoryIds": [old.memory_id, new_id], "supersededBy": new_id, "edgeIds": [edge_id]}


def _retract(odb: OrchestratorDB, edit: Retract, key: str) -> dict[str, Any]:
    stored = _stored(odb, edit.memory_id, "memoryId")
    _active(stored, "retract")
    set_status(stored, Status.RETRACTED, reason=edit.reason, actor=edit.actor, key=key)
    odb.log.write("retract", memoryId=stored.memory_id, reasonChars=len(edit.reason),
                  actor=edit.actor, key=key)
    return {"memoryIds": [stored.memory_id]}


def _recover(odb: OrchestratorDB, edit: Recover, key: str) -> dict[str, Any]:
    """Reactivate a retracted memory; an erased one (hard forget) cannot come back."""
    stored = _stored(odb, edit.memory_id, "memoryId")
    if stored.forgotten:
        raise MemoryErased(
            f"cannot recover {stored.memory_id}: a hard forget erased it",
            [{"path": "memoryId", "message": "memory was erased by a hard forget"}])
    if stored.status != Status.RETRACTED.value:
        raise MemoryValidationError(
            f"cannot recover {stored.memory_id}: it is {stored.status}, not retracted",
            [{"path": "memoryId", "message": f"memory is {stored.status}"}])
    set_status(stored, Status.ACTIVE, reason=edit.reason or "recovered", actor=edit.actor,
               key=key, op="recover")
    odb.log.write("recover", memoryId=stored.memory_id, reasonChars=len(edit.reason or ""),
                  actor=edit.actor, key=key)
    return {"memoryIds": [stored.memory_id], "status": Status.ACTIVE.value}


def _link(odb: OrchestratorDB, edit: Link, key: str) -> dict[str, Any]:
    for end, where in ((edit.from_memory_id, "fromMemoryId"), (edit.to_memory_id, "toMemoryId")):
        _stored(odb, end, where)
    edge = EdgeInput(from_memory_id=edit.from_memory_id, to_memory_id=edit.to_memory_id,
                     edge_type=edit.edge_type, weight=edit.weight, reason=edit.reason)
    edge_id = insert_edge(odb, edge, from_id=edit.from_memory_id, to_id=edit.to_memory_id,
                          key=key, actor=edit.actor)
    odb.log.write("link", edgeId=edge_id, edgeType=edit.edge_type.value,
                  memoryIds=[edit.from_memory_id, edit.to_memory_id], actor=edit.actor, key=key)
    return {"memoryIds": [edit.from_memory_id, edit.to_memory_id], "edgeIds": [edge_id]}


def _forget(odb: OrchestratorDB, edit: Forget, key: str) -> dict[str, Any]:
    stored = _stored(odb, edit.memory_id, "memoryId")
    if stored.forgotten:
        raise MemoryValidationError(f"{stored.memory_id} is already forgotten")
    if not edit.hard:
        _active(stored, "forget")
        set_status(stored, Status.RETRACTED, reason=edit.reason or "forgotten",
                   actor=edit.actor, key=key)
        odb.log.write("forget", memoryId=stored.memory_id, hard=False, actor=edit.actor,
                      key=key)
        return {"memoryIds": [stored.memory_id], "hard": False}
    words = _words_of(stored)
    erased = derived.forget_memory(odb, stored)
    add_event("forget_hard", [stored.memory_id],
              before={"type": stored.type, "status": stored.status},
              after={"status": Status.RETRACTED.value, "forgotten": True},
              reason=_redacted(edit.reason, words), actor=edit.actor, key=key)
    odb.log.write("forget", memoryId=stored.memory_id, hard=True, actor=edit.actor, key=key,
                  deadLetters=erased["deadLetters"], files=len(erased["files"]),
                  logEvents=erased["logEvents"], episodes=erased["episodes"])
    return {"memoryIds": [stored.memory_id], "hard": True, "erased": erased}


def _words_of(stored: StoredMemory) -> set[str]:
    said = " ".join(t for t in (stored.content, stored.subject, stored.value) if t)
    return {w.casefold() for w in _WORD.findall(said)}


def _redacted(reason: str | None, words: set[str]) -> str | None:
    """``reason`` with every word of the forgotten memory replaced by ``[…]``."""
    if reason is None:
        return None
    return _WORD.sub(lambda m: "[…]" if m.group().casefold() in words else m.group(), reason)
