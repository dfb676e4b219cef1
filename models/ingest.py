"""The ingest pipeline: files dropped in ``memory/ingest/`` become memories exactly once.

For each file directly in ``ingest/`` (sorted by name; hidden, ``.tmp`` and ``.part``
files and files younger than ``min_file_age_s`` are left for later):

1. **claim** - the file is renamed into ``ingest/.inflight/`` (:mod:`.ingest_files`):
   everything below happens to that one file, even if a newer one is dropped under
   the same name meanwhile (it waits in ``ingest/`` for the next scan).
2. **inspect** - a regular file, not a symlink, canonical path inside the workspace,
   a supported extension, within the size limit, UTF-8 text; parsed (``.json`` as
   explicit records, ``.md``/``.txt`` through the document extractor) and validated
   (:mod:`.ingest_parse`).
3. **commit** - memories, edges and an ``ingest_manifest`` row (file, sha256, size,
   outcome, memoryIds) in one transaction, idempotent on ``ingest-<sha256>``.
4. **finish** - the claimed file moves to ``processed/`` (or ``rejected/`` beside a
   ``<name>.reason.json``, :mod:`.ingest_moves`), then the manifest row is marked moved.

A crash before the commit leaves nothing but the claimed file: the next scan takes it
from ``.inflight/`` and starts over. A crash after the commit and before the move
leaves a manifest row not yet marked moved: the next scan sees the same sha256 and
only finishes the move. A file whose content was already ingested is a ``duplicate``:
moved to ``processed/``, nothing written twice.

A scan whose ``ingest/`` (or its ``processed/``/``rejected/``/``.inflight/``) resolves
outside the workspace, e.g. a symlinked folder, is refused whole (``outside_workspace``)
before anything there is created, moved or written. A file that changes or disappears
between its checks and its read is put back into ``ingest/`` for the next scan
(skipped, ``changed``). Rejection reasons: :mod:`.ingest_outcomes`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from orchmem.config import IngestRejected, MemoryNotFound, MemoryValidationError, ScopeViolation

from .ingest_files import Candidate, claim, discover, outside_workspace, release
from .ingest_moves import move_to_processed, move_to_rejected
from .ingest_outcomes import CHANGED, FileOutcome, Rejection
from .ingest_parse import Parsed, inspect
from .reconcile import Proposed
from .storage.database import OrchestratorDB
from .storage.events import add_event
from .storage.manifest import (
    ManifestEntry,
    add_entry,
    latest_ingested,
    mark_moved,
    pending_moves,
    record_outcome,
)
from .writeback import write_memories

#: Adds vectors to proposals: ``(proposals) -> (proposals, embedder version or None)``.
Embed = Callable[[list[Proposed]], tuple[list[Proposed], str | None]]
_DUPLICATE = "this content was ingested before"


def commit(odb: OrchestratorDB, parsed: Parsed, embed: Embed,
           task: str) -> tuple[dict[str, Any], int] | Rejection:
    """Write the file's memories and its manifest row in one transaction.

    Returns the write-back result and the id of the manifest row (not yet moved), or
    the Rejection when an edge names a memory this orchestrator lacks (nothing is
    written then). ``embed(proposals) -> (proposals, embedder_version | None)`` adds
    vectors first, outside the transaction.
    """
    proposals, embedder = embed(parsed.proposals)
    row_ids: list[int] = []

    def record(result: dict[str, Any]) -> None:
        row_ids.append(add_entry(parsed.name, parsed.sha256, parsed.size, "ingested",
                                 result["memoryIds"]))
        add_event("ingest", result["created"], after={"file": parsed.name,
                                                      "sha256": parsed.sha256},
                  actor="extractor", key=f"ingest-{parsed.sha256}")

    try:
        result = write_memories(odb, key=f"ingest-{parsed.sha256}", task=task,
                                memories=proposals, edges=parsed.edges, embedder=embedder,
                                also=record)
    except ScopeViolation as exc:
        return Rejection("scope_violation", str(exc)[:1000], parsed.sha256, parsed.size)
    except (MemoryValidationError, MemoryNotFound) as exc:
        return Rejection("schema_violation", str(exc)[:1000], parsed.sha256, parsed.size)
    if not row_ids:
        # The receipt of this content was final already (its manifest row is gone):
        # nothing was written, but the file still gets its row.
        row_ids.append(record_outcome(odb, parsed.name, parsed.sha256, parsed.size,
                                      "ingested", result["memoryIds"]))
    return result, row_ids[0]


def process(odb: OrchestratorDB, candidate: Candidate, embed: Embed, task: str) -> FileOutcome:
    """One file through claim, inspect, commit and finish; see the module docstring."""
    workspace = odb.workspace
    try:
        claimed = claim(candidate, workspace)
    except IngestRejected as exc:
        return _logged(odb, FileOutcome(candidate.name, "skipped", reason=exc.reason,
                                        detail=exc.detail))
    inspected = inspect(claimed, workspace, odb.memory.ingest,
                        odb.memory.writeback.max_content_chars)
    if isinstance(inspected, Rejection) and inspected.reason == CHANGED:
        release(claimed, workspace)
        return _logged(odb, FileOutcome(claimed.name, "skipped", reason=CHANGED,
                                        detail=inspected.detail))
    if isinstance(inspected, Rejection):
        return _logged(odb, _finish_rejected(odb, claimed, inspected))
    earlier = latest_ingested(odb, inspected.sha256)
    if earlier is not None:
        return _logged(odb, _finish_seen(odb, inspected, earlier))
    committed = commit(odb, inspected, embed, task)
    if isinstance(committed, Rejection):
        return _logged(odb, _finish_rejected(odb, claimed, committed))
    result, row_id = committed
    move_to_processed(workspace, claimed.path, inspected.sha256)
    mark_moved(odb, [row_id])
    return _logged(odb, FileOutcome(claimed.name, "ingested", inspected.sha256,
                                    list(result["memoryIds"])))


def _finish_seen(odb: OrchestratorDB, parsed: Parsed, earlier: ManifestEntry) -> FileOutcome:
    """A file whose content has an ``ingested`` row: finish its move, or a duplicate."""
    if not earlier.moved:
        # Committed by a scan that stopped before the move: only the move is left.
        move_to_processed(odb.workspace, parsed.path, parsed.sha256)
        mark_moved(odb, [earlier.id])
        return FileOutcome(parsed.name, "repaired", parsed.sha256, earlier.memory_ids)
    row_id = record_outcome(odb, parsed.name, parsed.sha256, parsed.size, "duplicate",
                            earlier.memory_ids, "duplicate", _DUPLICATE)
    move_to_processed(odb.workspace, parsed.path, parsed.sha256)
    mark_moved(odb, [row_id])
    return FileOutcome(parsed.name, "duplicate", parsed.sha256, earlier.memory_ids,
                       "duplicate", _DUPLICATE)


def _finish_rejected(odb: OrchestratorDB, claimed: Candidate,
                     rejection: Rejection) -> FileOutcome:
    row_id = record_outcome(odb, claimed.name, rejection.sha256, rejection.size, "rejected",
                            [], rejection.reason, rejection.detail)
    move_to_rejected(odb.workspace, claimed.path, rejection.sha256, rejection.reason,
                     rejection.detail)
    mark_moved(odb, [row_id])
    return FileOutcome(claimed.name, "rejected", rejection.sha256, [], rejection.reason,
                       rejection.detail)


def settle_moves(odb: OrchestratorDB) -> None:
    """Mark rows moved whose file already left ingest/ (a crash between move and mark)."""
    workspace = odb.workspace
    done = [row_id for row_id, name in pending_moves(odb)
            if not os.path.lexists(workspace.inflight_dir / name)
            and not os.path.lexists(workspace.ingest_dir / name)]
    if done:
        mark_moved(odb, done)


def _logged(odb: OrchestratorDB, outcome: FileOutcome) -> FileOutcome:
    odb.log.write("ingest_file", file=outcome.file, outcome=outcome.outcome,
                  sha256=outcome.sha256 or None, memories=len(outcome.memory_ids),
                  reason=outcome.reason, detail=outcome.detail)
    return outcome


def scan(odb: OrchestratorDB, embed: Embed, task: str) -> dict[str, Any]:
    """Handle up to ``max_files_per_scan`` files of ingest/; returns counts and outcomes.

    Raises ScopeViolation (``outside_workspace: ...``, also a memory.log line) when the
    ingest folders resolve outside the workspace; nothing is touched then.
    """
    settings = odb.memory.ingest
    refusal = outside_workspace(odb.workspace)
    if refusal is not None:
        odb.log.write("ingest_refused", reason="outside_workspace", detail=refusal)
        raise ScopeViolation(f"outside_workspace: {refusal}")
    odb.workspace.ensure()
    settle_moves(odb)
    ready, later = discover(odb.workspace, settings)
    batch = ready[: settings.max_files_per_scan]
    outcomes = [process(odb, candidate, embed, task) for candidate in batch] + later
    counts = {name: sum(1 for o in outcomes if o.outcome == name)
              for name in ("ingested", "rejected", "duplicate", "repaired", "skipped")}
    return {**counts, "remaining": len(ready) - len(batch),
            "files": [o.to_dict() for o in outcomes]}
