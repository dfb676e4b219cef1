"""The ingest pipeline: files dropped in ``memory/ingest/`` become memories exactly once.

For each file directly in ``ingest/`` (sorted by name; hidden, ``.tmp`` and ``.part``
files and files younger than ``min_file_age_s`` are left for later):

1. **claim** - the file is renamed into ``ingest/.inflight/`` (:mod:`.files`):
   everything below happens to that one file, even if a newer one is dropped under
   the same name meanwhile (it waits in ``ingest/`` for the next scan).
2. **inspect** - a regular file, not a symlink, canonical path inside the workspace,
   a supported extension, within the size limit, UTF-8 text; parsed (``.json`` as
   explicit records, ``.md``/``.txt`` through the document extractor) and validated
   (:mod:`.parse`).
3. **commit** - memories, edges and an ``ingest_manifest`` row (file, sha256, size,
   outcome, memoryIds), idempotent on ``ingest-<sha256>``. The files of one scan that
   reach this step are embedded in one model call and committed in one transaction,
   a savepoint per file (a file rejected here rolls back alone).
4. **finish** - the claimed file moves to ``processed/`` (or ``rejected/`` beside a
   ``<name>.reason.json``, :mod:`.outcomes`), then the manifest rows are marked moved.

A crash before the commit leaves nothing but the claimed files: the next scan takes
them from ``.inflight/`` and starts over. A crash after the commit and before the move
leaves a manifest row not yet marked moved: the next scan sees the same sha256 and
only finishes the move. A file whose content was already ingested is a ``duplicate``:
moved to ``processed/``, nothing written twice.

A scan whose ``ingest/`` (or its ``processed/``/``rejected/``/``.inflight/``) resolves
outside the workspace, e.g. a symlinked folder, is refused whole (``outside_workspace``)
before anything there is created, moved or written. A file that changes or disappears
between its checks and its read is put back into ``ingest/`` for the next scan
(skipped, ``changed``). Rejection reasons: :mod:`.outcomes`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchmem.config import IngestRejected, MemoryNotFound, MemoryValidationError, ScopeViolation
from orchmem.models.ingest.files import (
    Candidate,
    claim,
    discover,
    outside_workspace,
    release,
)
from orchmem.models.ingest.outcomes import (
    CHANGED,
    FileOutcome,
    Rejection,
    move_to_processed,
    move_to_rejected,
)
from orchmem.models.ingest.parse import Parsed, inspect
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery.manifest import (
    ManifestEntry,
    add_entry,
    latest_ingested,
    mark_moved,
    pending_moves,
    record_outcome,
)
from orchmem.models.storage.memories.events import add_event
from orchmem.models.telemetry import names, spans
from orchmem.models.writeback.apply import write_memories
from orchmem.models.writeback.reconcile import Proposed

#: Adds vectors to proposals: ``(proposals) -> (proposals, embedder version or None)``.
Embed = Callable[[list[Proposed]], tuple[list[Proposed], str | None]]
_DUPLICATE = "this content was ingested before"


def commit(odb: OrchestratorDB, parsed: Parsed, proposals: list[Proposed],
           embedder: str | None, task: str) -> tuple[dict[str, Any], int] | Rejection:
    """Write the file's memories (``proposals``: its own, with vectors of ``embedder``
    when there are) and its manifest row in one transaction (a savepoint of the caller's).

    Returns the write-back result and the id of the manifest row (not yet moved), or
    the Rejection when an edge names a memory this orchestrator lacks (nothing of the
    file is written then).
    """
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


@dataclass(frozen=True)
class _Ready:
    """A claimed file with new content, waiting for the scan's commit."""

    position: int
    claimed: Candidate
    parsed: Parsed


def process_all(odb: OrchestratorDB, candidates: list[Candidate], embed: Embed,
                task: str) -> list[FileOutcome]:
    """Each file through claim, inspect, commit and finish; one outcome per file, in
    order. The files with new content are embedded in one model call and committed
    in one transaction (:func:`_commit_ready`); the same content or the same name twice
    in one scan commits (and moves) the first before the second is looked at (the same
    content is then a duplicate)."""
    outcomes: list[FileOutcome | None] = []
    ready: list[_Ready] = []
    begun: list[int] = []
    for candidate in candidates:
        begun.append(time.time_ns())
        if any(r.claimed.name == candidate.name for r in ready):
            # Its claim would take the name in .inflight/ that a waiting file holds.
            _commit_ready(odb, ready, embed, task, outcomes)
            ready = []
        checked = _check(odb, candidate)
        if isinstance(checked, FileOutcome):
            outcomes.append(checked)
            continue
        claimed, parsed = checked
        if any(r.parsed.sha256 == parsed.sha256 for r in ready):
            _commit_ready(odb, ready, embed, task, outcomes)
            ready = []
            earlier = latest_ingested(odb, parsed.sha256)
            if earlier is not None:
                outcomes.append(_logged(odb, _finish_seen(odb, parsed, earlier)))
                continue
        outcomes.append(None)
        ready.append(_Ready(len(outcomes) - 1, claimed, parsed))
    _commit_ready(odb, ready, embed, task, outcomes)
    done = [o for o in outcomes if o is not None]
    if spans.enabled():
        _file_spans(done, begun)
    return done


def _file_spans(outcomes: list[FileOutcome], begun: list[int]) -> None:
    """One span per file, from the start of its check to its outcome (one per
    candidate, in order): its name, outcome, reason code and memories, never its text."""
    for outcome, started in zip(outcomes, begun, strict=False):
        spans.record(names.SPAN_INGEST_FILE, {
            names.FILE: outcome.file, names.OUTCOME: outcome.outcome,
            names.REASON: outcome.reason or "", names.COUNT: len(outcome.memory_ids)},
            started, outcome.finished_ns or time.time_ns())


def _check(odb: OrchestratorDB, candidate: Candidate) -> FileOutcome | tuple[Candidate, Parsed]:
    """Claim and inspect one file: its outcome when it ends here (skipped, rejected,
    repaired, duplicate), else the claimed file and its parsed content."""
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
    return claimed, inspected


def _commit_ready(odb: OrchestratorDB, ready: list[_Ready], embed: Embed, task: str,
                  outcomes: list[FileOutcome | None]) -> None:
    """Embed every memory of ``ready`` in one call, commit them in one transaction (a
    savepoint per file: a rejected file rolls back alone), then move each file and
    mark the moved rows; fills each file's place in ``outcomes``.

    A crash before the commit leaves the claimed files for the next scan; after it,
    the next scan finishes the moves (the manifest rows say what was committed)."""
    if not ready:
        return
    proposals, embedder = embed([p for r in ready for p in r.parsed.proposals])
    committed: list[tuple[dict[str, Any], int] | Rejection] = []
    start = 0
    try:
        with odb.write():
            for r in ready:
                end = start + len(r.parsed.proposals)
                committed.append(commit(odb, r.parsed, proposals[start:end], embedder, task))
                start = end
    except BaseException:
        # Vectors of files committed earlier in the rolled-back transaction may be in
        # the cached index (it is refreshed inside it): it is rebuilt on next use.
        odb.cache.clear()
        raise
    moved: list[int] = []
    for r, outcome in zip(ready, committed, strict=True):
        if isinstance(outcome, Rejection):
            outcomes[r.position] = _logged(odb, _finish_rejected(odb, r.claimed, outcome))
            continue
        result, row_id = outcome
        move_to_processed(odb.workspace, r.claimed.path, r.parsed.sha256)
        moved.append(row_id)
        outcomes[r.position] = _logged(odb, FileOutcome(
            r.claimed.name, "ingested", r.parsed.sha256, list(result["memoryIds"])))
    if moved:
        mark_moved(odb, moved)


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
    outcome.finished_ns = time.time_ns()
    odb.log.write("ingest_file", file=outcome.file, outcome=outcome.outcome,
                  sha256=outcome.sha256 or None, memories=len(outcome.memory_ids),
                  reason=outcome.reason, detail=outcome.detail)
    return outcome


def scan(odb: OrchestratorDB, embed: Embed, task: str) -> dict[str, Any]:
    """Handle up to ``max_files_per_scan`` files of ingest/; returns counts and outcomes.

    Raises ScopeViolation (``outside_workspace: ...``, also a memory.log line) when the
    ingest folders resolve outside the workspace; nothing is touched then.
    """
    with spans.span(names.SPAN_INGEST_SCAN, {names.ORCHESTRATOR: odb.orchestrator_id}) as span:
        settings = odb.memory.ingest
        refusal = outside_workspace(odb.workspace)
        if refusal is not None:
            odb.log.write("ingest_refused", reason="outside_workspace", detail=refusal)
            span.set(names.OUTCOME, "outside_workspace")
            raise ScopeViolation(f"outside_workspace: {refusal}")
        odb.workspace.ensure()
        settle_moves(odb)
        ready, later = discover(odb.workspace, settings)
        batch = ready[: settings.max_files_per_scan]
        outcomes = process_all(odb, batch, embed, task) + later
        counts = {name: sum(1 for o in outcomes if o.outcome == name)
                  for name in ("ingested", "rejected", "duplicate", "repaired", "skipped")}
        span.update({names.OUTCOME: "ok", names.COUNT: len(batch),
                     names.REMAINING: len(ready) - len(batch),
                     **{names.INGEST + name: n for name, n in counts.items()}})
        return {**counts, "remaining": len(ready) - len(batch),
                "files": [o.to_dict() for o in outcomes]}
