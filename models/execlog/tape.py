"""Memories rebuilt from the execution log (seed 004's tape-driven rebuild).

Which memories the log can give back: those written from a run's step, i.e. whose
source names a run of this orchestrator (``workflowRunId`` as ``memory.run`` issues
it; :func:`run_of`). A write-back logs one snapshot of each such memory it creates, in
its transaction (:func:`log_created`); every later audited change of one logs a fresh
snapshot (models/storage/execlog/tape.py). Memories written outside a run (by hand,
ingested files, a transcript without a run) are not on the log: backups and exports
bring those back.

:func:`rebuild_from_log` replays the last snapshot of each memory into the memory rows
with the same ids: rows, sources and edges as they were at that snapshot, the full-text
index by its triggers, the vectors by embedding again. A memory still stored is
verified (same type and content) and skipped; one stored with other content is a
conflict, which refuses the whole rebuild. A memory whose last snapshot is a hard
forget's comes back as the same tombstone (no words, forgotten); one whose last
snapshot was erased does not come back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchmem.config import ImportRejected
from orchmem.models.core.shapes import Source, orchestrator_tag
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.embedding.reembed import reembed_batch, remaining
from orchmem.models.execlog.rules import RUN_ID_PATTERN
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.execlog import tape as stored
from orchmem.models.storage.execlog.entries import has_log
from orchmem.models.storage.execlog.redaction import REDACTED
from orchmem.models.storage.memories import portable
from orchmem.models.storage.memories.events import add_event

_RUN_ID = re.compile(RUN_ID_PATTERN)
#: Snapshots read a page at a time.
_PAGE = 1000
#: Called with (part, done, total).
Progress = Callable[[str, int, int], None]


def run_of(source: Source, orchestrator_id: str) -> str | None:
    """The run of this orchestrator ``source`` names, or None."""
    run_id = source.workflow_run_id
    if run_id is None or _RUN_ID.fullmatch(run_id) is None \
            or run_id[2:10] != orchestrator_tag(orchestrator_id):
        return None
    return run_id


def log_created(odb: OrchestratorDB, key: str, created: Sequence[tuple[str, Source]],
                at: str) -> int:
    """Log the first snapshot of each created memory whose source names a run (inside
    the write-back's transaction, after its edges); returns how many were logged."""
    logged = 0
    for memory_id, source in created:
        run_id = run_of(source, odb.orchestrator_id)
        if run_id is not None and stored.log_snapshot(
                memory_id, run_id, source.step_id, stored.first_key(memory_id), "create",
                key, at):
            logged += 1
    return logged


@dataclass
class Replay:
    """The last snapshot of each memory on the log, and what a rebuild makes of them."""

    snapshots: int = 0
    last: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    new: list[dict[str, Any]] = field(default_factory=list)
    verified: int = 0
    erased: int = 0
    conflicts: list[dict[str, str]] = field(default_factory=list)


def _read(odb: OrchestratorDB, progress: Progress | None) -> Replay:
    replay = Replay()
    if not has_log(odb):  # a file older than the log's schema: nothing on the tape
        return replay
    total = stored.count_snapshots(odb)
    after = 0
    while True:
        page = stored.read_snapshots(odb, after, _PAGE)
        if not page:
            return replay
        for seq, memory_id, _, data in page:
            replay.snapshots += 1
            whole = data is not None and REDACTED not in data and "record" in data
            replay.last[memory_id] = data if whole else None
            after = seq
        if progress:
            progress("snapshots", replay.snapshots, max(total, replay.snapshots))


def _plan(odb: OrchestratorDB, replay: Replay) -> None:
    have = portable.stored_lines(odb, list(replay.last))
    for memory_id, data in replay.last.items():
        if data is None:
            replay.erased += 1
            continue
        record, now = data["record"], have.get(memory_id)
        if now is None:
            replay.new.append(data)
        elif (now.get("type"), now.get("content")) == (record.get("type"),
                                                       record.get("content")):
            replay.verified += 1
        else:
            replay.conflicts.append({"path": f"memories.{memory_id}",
                                     "message": "stored with another type or content than "
                                                "its last snapshot on the log"})


def _edges(odb: OrchestratorDB, replay: Replay, new_ids: set[str]) -> list[dict[str, Any]]:
    """Edges of the snapshots whose ends are both stored once the rebuild is written; a
    reason a hard forget took out of any copy stays out."""
    present = new_ids | set(portable.stored_lines(odb, [
        e[k] for d in replay.new for e in d.get("edges", [])
        for k in ("fromMemoryId", "toMemoryId")]))
    existing = portable.existing_edges(odb)
    chosen: dict[str, dict[str, Any]] = {}
    for data in replay.new:
        for edge in data.get("edges", []):
            if edge["fromMemoryId"] not in present or edge["toMemoryId"] not in present \
                    or (edge["fromMemoryId"], edge["toMemoryId"], edge["edgeType"]) in existing:
                continue
            kept = chosen.setdefault(edge["edgeId"], edge)
            if edge.get("reason") is None:
                kept["reason"] = None
    stored_ids = stored.stored_edge_ids(odb, list(chosen))
    return [edge for edge_id, edge in chosen.items() if edge_id not in stored_ids]


def _write(odb: OrchestratorDB, replay: Replay) -> dict[str, int]:
    new_ids = {d["memoryId"] for d in replay.new}
    written = {
        "records": portable.insert(odb, "records", [d["record"] for d in replay.new]),
        "sources": portable.insert(odb, "sources",
                                   [s for d in replay.new for s in d.get("sources", [])]),
        "edges": portable.insert(odb, "edges", _edges(odb, replay, new_ids)),
        "tombstones": sum(1 for d in replay.new if d["record"].get("forgotten")),
    }
    add_event("rebuild_from_log", [], after={**written, "verified": replay.verified,
                                             "erased": replay.erased}, actor="operator")
    return written


def rebuild_from_log(odb: OrchestratorDB, *, embedder: Embedder | None, batch_size: int,
                     dry_run: bool = False, progress: Progress | None = None
                     ) -> dict[str, Any]:
    """Replay the log's memory snapshots into ``odb`` (a writer's handle), then embed
    the memories without a vector. Returns ``{"snapshots", "memories", "written":
    {records, sources, edges, tombstones}, "verified", "erased", "vectors", "dryRun"}``
    (``written`` is what a dry run would write; it writes nothing). Raises
    ImportRejected (reason ``conflict``, nothing written) when a memory is stored with
    other content than its last snapshot."""
    with odb.read() if dry_run else odb.write():
        replay = _read(odb, progress)
        _plan(odb, replay)
        if replay.conflicts:
            raise ImportRejected("conflict", f"{len(replay.conflicts)} memories are stored "
                                 "with other content than the log's last snapshot of them; "
                                 "nothing was rebuilt", replay.conflicts)
        if dry_run:
            new_ids = {d["memoryId"] for d in replay.new}
            written = {"records": len(replay.new),
                       "sources": sum(len(d.get("sources", [])) for d in replay.new),
                       "edges": len(_edges(odb, replay, new_ids)),
                       "tombstones": sum(1 for d in replay.new if d["record"].get("forgotten"))}
        else:
            written = _write(odb, replay)
    if progress:
        progress("records", len(replay.new), len(replay.new))
    report: dict[str, Any] = {"snapshots": replay.snapshots, "memories": len(replay.last),
                              "written": written, "verified": replay.verified,
                              "erased": replay.erased, "vectors": 0, "dryRun": dry_run}
    if not dry_run and embedder is not None and replay.new:
        report["vectors"] = _embed(odb, embedder, batch_size, progress)
    odb.log.write("rebuilt_from_log", **{k: v for k, v in report.items() if k != "written"},
                  **written)
    return report


def _embed(odb: OrchestratorDB, embedder: Embedder, batch_size: int,
           progress: Progress | None) -> int:
    total = remaining(odb, embedder.version)
    done = 0
    while True:
        count = reembed_batch(odb, embedder, batch_size)
        if count == 0:
            return done
        done += count
        if progress:
            progress("vectors", done, total)
