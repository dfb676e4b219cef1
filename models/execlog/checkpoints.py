"""Checkpoints you can use (seed 003): restore one, branch a run from it, diff two, and
a run's events as a tree.

A checkpoint is a ``checkpoint`` event of the log: a pointer to serialized state (its
``ref``), that state's schema version and its parent checkpoint. Restoring hands the
pointer back after checking its schema against ``memory.log.checkpoint_schema_versions``
(an incompatible one is refused: the state would not load); branching starts a new run
whose ``run_start`` names the checkpoint and its run (``data.branchOf``), and whose first
checkpoint has it as parent. These functions work on events as the log reads them
(models/storage/execlog/entries.py); none writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from orchmem.config import MemoryNotFound, MemoryValidationError
from orchmem.config.memory_settings import ExecLogSettings
from orchmem.models.execlog.rules import check_event_id

#: The metadata of a checkpoint that :func:`diff` compares.
FIELDS = ("runId", "ref", "schemaVersion", "parentCheckpointId", "stepId", "at", "seq",
          "replay")
#: Most parents walked when looking for a common ancestor.
MAX_ANCESTRY = 1000


def _refuse(path: str, message: str) -> NoReturn:
    text = f"{path}: {message}"
    raise MemoryValidationError(text, [{"path": path, "message": message}])


def metadata(event: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint event as ``{"checkpointId", "runId", "ref", "schemaVersion", ...}``."""
    return {"checkpointId": event["eventId"], "runId": event["runId"],
            "ref": event.get("checkpointRef"),
            "schemaVersion": event.get("checkpointSchemaVersion"),
            "parentCheckpointId": event.get("parentCheckpointId"),
            "stepId": event.get("stepId"), "at": event.get("at"), "seq": event.get("seq"),
            "replay": bool(event.get("replay"))}


def find(read: Callable[[str], dict[str, Any] | None], checkpoint_id: object,
         orchestrator_id: str, where: str) -> dict[str, Any]:
    """The checkpoint ``checkpoint_id`` of this orchestrator's log, as :func:`metadata`.
    MemoryValidationError naming ``where`` for a malformed id or an event that is not a
    checkpoint, ScopeViolation for another orchestrator's, MemoryNotFound when absent."""
    if not isinstance(checkpoint_id, str):
        _refuse(where, f"must be a checkpoint's eventId, not {type(checkpoint_id).__name__}")
    check_event_id(checkpoint_id, orchestrator_id, where)
    event = read(checkpoint_id)
    if event is None:
        raise MemoryNotFound(f"{where}: no checkpoint {checkpoint_id} in the log of "
                             f"{orchestrator_id!r}")
    if event["kind"] != "checkpoint":
        _refuse(where, f"{checkpoint_id} is a {event['kind']} event, not a checkpoint")
    return metadata(event)


def check_restorable(checkpoint: dict[str, Any], limits: ExecLogSettings,
                     where: str) -> dict[str, Any]:
    """``checkpoint`` if its state's schema is one this orchestrator restores;
    MemoryValidationError naming ``<where>.schemaVersion`` otherwise."""
    version = checkpoint["schemaVersion"]
    if version not in limits.checkpoint_schema_versions:
        _refuse(f"{where}.schemaVersion",
                f"checkpoint {checkpoint['checkpointId']} has state schema version {version}; "
                f"this orchestrator restores {sorted(limits.checkpoint_schema_versions)} "
                "(memory.log.checkpoint_schema_versions)")
    return checkpoint


def ancestry(read: Callable[[str], dict[str, Any] | None],
             checkpoint: dict[str, Any]) -> list[str]:
    """The checkpoint's id and its parents' ids, nearest first (bounded)."""
    chain = [checkpoint["checkpointId"]]
    parent = checkpoint.get("parentCheckpointId")
    while parent and len(chain) < MAX_ANCESTRY and parent not in chain:
        chain.append(parent)
        event = read(parent)
        parent = event.get("parentCheckpointId") if event else None
    return chain


def diff(read: Callable[[str], dict[str, Any] | None], a: dict[str, Any],
         b: dict[str, Any]) -> dict[str, Any]:
    """What differs between two checkpoints' metadata, and how they are related: the
    nearest checkpoint both descend from (``commonAncestor``, None when none)."""
    changed = {name: [a.get(name), b.get(name)] for name in FIELDS if a.get(name) != b.get(name)}
    mine = ancestry(read, a)
    theirs = set(ancestry(read, b))
    common = next((c for c in mine if c in theirs), None)
    return {"a": a, "b": b, "changed": changed, "sameRun": a["runId"] == b["runId"],
            "commonAncestor": common,
            "eventsBetween": abs(int(b["seq"]) - int(a["seq"])) - 1
            if a["runId"] == b["runId"] and a["seq"] != b["seq"] else 0}


def tree(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's events as a tree of spans: an event whose parentId is another event of
    the run is its child (a step's events under its ``step_start``); the rest are roots,
    in append order."""
    nodes = {e["eventId"]: {**e, "children": []} for e in events}
    roots: list[dict[str, Any]] = []
    for event in events:
        parent = nodes.get(event.get("parentId") or "")
        (parent["children"] if parent is not None else roots).append(nodes[event["eventId"]])
    return roots
