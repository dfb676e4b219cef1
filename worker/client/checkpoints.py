"""Checkpoints from the client (models/execlog/checkpoints.py): restore one, diff two,
and the checks a branch runs before its first event. Reads memory.db read-only; a
refusal is logged in memory.log (``checkpoint_refused``) and raised, nothing else
changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orchmem.config import OrchmemError
from orchmem.models.execlog import checkpoints
from orchmem.models.storage.execlog.entries import event_by_id
from orchmem.models.telemetry import names, spans

if TYPE_CHECKING:
    from orchmem.worker.client.memory_client import MemoryClient


def _reader(client: MemoryClient) -> Callable[[str], dict[str, Any] | None]:
    odb = client.databases.open(client.orchestrator_id, create=False)
    if odb is None:
        return lambda event_id: None
    return lambda event_id: event_by_id(odb, event_id)


def restore(client: MemoryClient, checkpoint_id: object,
            where: str = "checkpointId") -> dict[str, Any]:
    """The checkpoint's metadata (its ``ref`` is the state to load), after checking its
    schema version; raises MemoryValidationError / ScopeViolation / MemoryNotFound
    naming ``where`` (logged). Its span holds the checkpoint's id once found (a
    refused id, which the caller typed, is not repeated) and the outcome."""
    with spans.span(names.SPAN_CHECKPOINT_RESTORE,
                    {names.ORCHESTRATOR: client.orchestrator_id}) as span:
        try:
            found = checkpoints.find(_reader(client), checkpoint_id, client.orchestrator_id,
                                     where)
            span.set(names.CHECKPOINT_ID, found["checkpointId"])
            restored = checkpoints.check_restorable(found, client.memory.log, where)
        except OrchmemError as exc:
            span.set(names.OUTCOME, exc.code)
            client._log("checkpoint_refused", field=where, error=exc.code,
                        message=str(exc)[:300])
            raise
        span.set(names.OUTCOME, "ok")
        return restored


def diff(client: MemoryClient, a: object, b: object) -> dict[str, Any]:
    """The two checkpoints' metadata, what differs, and their nearest common ancestor."""
    read = _reader(client)
    try:
        first = checkpoints.find(read, a, client.orchestrator_id, "a")
        second = checkpoints.find(read, b, client.orchestrator_id, "b")
    except OrchmemError as exc:
        client._log("checkpoint_refused", error=exc.code, message=str(exc)[:300])
        raise
    return checkpoints.diff(read, first, second)
