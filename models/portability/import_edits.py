"""Edits an import finds: a line of ``records.jsonl`` that differs from the stored memory
it names, while the stored memory has not changed since the export (the same
``updatedAt``): someone edited the file.

Such a line is never skipped with its edit dropped. With ``apply_edits`` it is applied
as audited edits in the import's transaction: a change of the patchable fields
(importance, confidence, summary, tags, metadata, tier, scope, sessionId, projectId,
sensitivity) is a ``patch``, a change of content or type a ``supersede`` by the file's
text; each keeps its own receipt, so importing the same file again changes nothing.
Without it, each changed field is a conflict naming the record, the field and how to
apply it: the import refuses (reason ``conflict``), or with ``skip_conflicts`` leaves
the line out and reports it. A change of any other field (status, timestamps, sources)
cannot be applied by an import: refused with reason ``edited``, naming the command that
makes it, whatever the flags.

A stored memory that changed since the export (another ``updatedAt``) is newer than the
file: the line is skipped as before, or is a conflict when its type or content differ.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from orchmem.config import ImportRejected
from orchmem.models.core.shapes import validate_with
from orchmem.models.governance.edits import EDIT_ADAPTER, apply_edit
from orchmem.models.portability.export import FILES
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery import receipts
from orchmem.models.storage.memories import rows as memories

#: Fields of a line a patch applies -> the patch's key.
PATCHED = {"importance": "importance", "confidence": "confidence", "summary": "summary",
           "tags": "tags", "metadata": "metadata", "tier": "tier", "scope": "scope",
           "sessionId": "sessionId", "projectId": "projectId", "sensitivity": "sensitivity"}
#: Fields a supersede by the file's text applies.
SUPERSEDED = ("type", "content")
#: Fields that follow from the content: not compared.
DERIVED = frozenset({"fingerprint", "subject", "value"})
#: How to change what an import cannot.
_HOW = {"status": "use orchmem forget, retract or recover",
        "forgotten": "use orchmem forget --hard"}


@dataclass(frozen=True)
class Change:
    """One edited line: its number, memoryId and the changed fields' file values."""

    number: int
    memory_id: str
    fields: dict[str, Any]
    key: str


def differences(line: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """The fields ``line`` gives that differ from ``stored`` (derived ones left out)."""
    return {k: v for k, v in line.items()
            if k not in DERIVED and k in stored and stored[k] != v}


def edit_key(line: dict[str, Any]) -> str:
    """The idempotency key of applying ``line``: the same edited line, the same edit."""
    text = json.dumps(line, sort_keys=True, ensure_ascii=False)
    return f"import-edit-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def applied(line: dict[str, Any]) -> bool:
    """Whether this edited line was applied by an earlier import (inside a bound block)."""
    key = edit_key(line)
    return any(receipts.final_result_in_transaction(f"{key}-{op}") is not None
               for op in ("patch", "supersede"))


def refusals(number: int, memory_id: str, diff: dict[str, Any], apply_edits: bool
             ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Why an edited line cannot be imported as it is, one error per field: ``(conflicts,
    refused)``: what ``apply_edits`` would apply, and what no import applies."""
    where = f"{FILES['records']}:{number}"
    conflicts, refused = [], []
    for name, value in sorted(diff.items()):
        if name in PATCHED and value is None:
            how = f"it cannot be cleared by import; use orchmem patch {memory_id}"
        elif name in PATCHED or name in SUPERSEDED:
            if not apply_edits:
                conflicts.append({"path": f"{where}:{name}", "message": (
                    f"{memory_id}: {name} changed in the file; import with --apply-edits to "
                    "apply it as a " + ("supersede" if name in SUPERSEDED else "patch")
                    + ", or --skip-conflicts to leave it out")})
            continue
        else:
            how = _HOW.get(name, "an import cannot change it; export again and edit only "
                                 "the editable fields")
        refused.append({"path": f"{where}:{name}", "message": f"{memory_id}: {name} changed "
                        f"in the file; {how}"})
    return conflicts, refused


def edited(errors: list[dict[str, str]]) -> ImportRejected:
    return ImportRejected("edited", f"{len(errors)} fields of records.jsonl differ from the "
                          "stored memories; nothing was imported", errors)


def apply_changes(odb: OrchestratorDB, changes: list[Change]) -> list[dict[str, Any]]:
    """Apply each edited line as a patch and/or a supersede (inside the import's write
    transaction); returns what was done, one entry per line."""
    done = []
    for change in changes:
        reason = f"edited in the export ({FILES['records']}:{change.number})"
        fields = {PATCHED[k]: v for k, v in change.fields.items() if k in PATCHED}
        entry: dict[str, Any] = {"memoryId": change.memory_id, "line": change.number}
        if fields:
            apply_edit(odb, _edit({"op": "patch", "memoryId": change.memory_id,
                                   "reason": reason, **fields}, odb),
                       key=f"{change.key}-patch", task="import")
            entry["patched"] = sorted(fields)
        if any(k in change.fields for k in SUPERSEDED):
            text = change.fields.get("content")
            result = apply_edit(odb, _edit({
                "op": "supersede", "memoryId": change.memory_id, "reason": reason,
                "content": text if text is not None else _content(change.memory_id),
                "type": change.fields.get("type")}, odb),
                key=f"{change.key}-supersede", task="import")
            entry["supersededBy"] = result["supersededBy"]
        done.append(entry)
    return done


def _edit(payload: dict[str, Any], odb: OrchestratorDB) -> Any:
    return validate_with(EDIT_ADAPTER, {k: v for k, v in payload.items() if v is not None},
                         workspace=odb.workspace, name="records.jsonl")


def _content(memory_id: str) -> str:
    """The stored content (a line that changes only the type keeps its words)."""
    stored = memories.get(memory_id)
    return stored.content if stored is not None else ""
