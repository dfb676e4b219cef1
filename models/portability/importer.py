"""Import: an export folder into one orchestrator's memory, all of it or nothing.

:func:`import_folder` checks the whole folder first
(:mod:`orchmem.models.portability.import_files`),
plans the merge against the database, embeds the new memories in batches (outside any
transaction, reporting progress; a memory whose vector the export's optional
``vectors.jsonl`` holds for this embedder is not embedded again), then writes
everything in one IMMEDIATE transaction: records, sources, edges, audit events and
vectors, plus one ``import`` audit event.

Merging into a memory that already has rows:

- a memoryId already present and equal is skipped (the stored memory, its sources and
  status are kept); so is one whose stored memory changed since the export (another
  ``updatedAt``) with the same type and content: the store is newer;
- a line that differs from a stored memory unchanged since the export was edited: it
  is applied as audited edits with ``apply_edits`` (patch, supersede for content), and
  is a conflict otherwise, naming each changed field and how to apply it
  (:mod:`.import_edits`);
- a memoryId present, changed since the export, with another type or content is a
  conflict. By default any
  conflict refuses the whole import (``ImportRejected`` with reason ``conflict``, one
  error per line); with ``skip_conflicts`` those lines, their sources and the edges
  touching them are left out and reported, the rest is imported;
- an edge whose (from, to, type) already exists is skipped; an audit event already
  present (same op, ids, time, actor, key) is skipped, so importing twice adds nothing.

The import runs in the caller's process. It writes through SQLite's write lock like any
task: the shard's worker waits (``busy_timeout``) and its tasks retry a lock timeout,
so there is still one writer at a time
(docs/operations/export-and-import.md#the-single-writer).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchmem.config import ImportRejected
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.portability import import_edits
from orchmem.models.portability.export import FILES
from orchmem.models.portability.import_edits import Change
from orchmem.models.portability.import_files import Bundle, load, read_vectors
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories import portable
from orchmem.models.storage.memories.events import add_event
from orchmem.models.storage.search.vectors import store_embeddings

#: Called with (memories embedded so far, memories to embed).
Progress = Callable[[int, int], None]


@dataclass
class Plan:
    """What an import will write, and what it leaves out."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    conflicts: list[dict[str, str]] = field(default_factory=list)
    left_out: set[str] = field(default_factory=set)
    #: Edited lines to apply (``apply_edits``), and why the others cannot be.
    edits: list[Change] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)
    #: What applying the edits did (set by the write).
    applied: list[dict[str, Any]] = field(default_factory=list)


def plan(odb: OrchestratorDB, bundle: Bundle, apply_edits: bool = False) -> Plan:
    """Classify the records against the database (inside a bound block)."""
    records = bundle.lines["records"]
    stored = portable.stored_lines(odb, [r["memoryId"] for r in records])
    out = Plan()
    for number, row in enumerate(records, start=1):
        have = stored.get(row["memoryId"])
        diff = import_edits.differences(row, have) if have is not None else {}
        if have is None:
            out.records.append(row)
        elif not diff or import_edits.applied(row):
            out.skipped += 1
        elif have["updatedAt"] == row.get("updatedAt"):
            conflicts, refused = import_edits.refusals(number, row["memoryId"], diff,
                                                       apply_edits)
            out.refused += refused
            out.conflicts += conflicts
            if conflicts:
                out.left_out.add(row["memoryId"])
            elif apply_edits and not refused:
                out.edits.append(Change(number, row["memoryId"], diff,
                                        import_edits.edit_key(row)))
        elif not any(k in diff for k in ("type", "content")):
            out.skipped += 1
        else:
            out.conflicts.append({"path": f"{FILES['records']}:{number}:content",
                                  "message": f"{row['memoryId']} is stored with another "
                                             "type or content"})
            out.left_out.add(row["memoryId"])
    return out


def _embed(embedder: Embedder, records: list[dict[str, Any]], batch_size: int,
           progress: Progress | None) -> dict[str, Any]:
    todo = [r for r in records if not r.get("forgotten") and r["content"]]
    vectors: dict[str, Any] = {}
    for start in range(0, len(todo), batch_size):
        batch = todo[start:start + batch_size]
        matrix = embedder.encode([r["content"] for r in batch])
        vectors.update(zip([r["memoryId"] for r in batch], matrix, strict=True))
        if progress:
            progress(len(vectors), len(todo))
    return vectors


def _conflict(conflicts: list[dict[str, str]]) -> ImportRejected:
    return ImportRejected("conflict", f"{len(conflicts)} memoryIds are stored with other "
                          "content; nothing was imported (use --skip-conflicts to import the "
                          "rest)", conflicts)


def _write(odb: OrchestratorDB, bundle: Bundle, expected: Plan, vectors: dict[str, Any],
           embedder: str, apply_edits: bool) -> dict[str, int]:
    """The one transaction. The plan is made again under the write lock: a memory written
    since the first look is never overwritten."""
    with portable.large_cache(odb), odb.write():
        now = plan(odb, bundle, apply_edits)
        if now.conflicts != expected.conflicts:
            raise _conflict(now.conflicts)
        if now.refused or now.edits != expected.edits:
            raise import_edits.edited(now.refused or [
                {"path": FILES["records"], "message": "the stored memories changed while "
                 "importing; import again"}])
        new_ids = {r["memoryId"] for r in now.records}
        present = new_ids | {r["memoryId"] for r in bundle.lines["records"]
                             if r["memoryId"] not in now.left_out}
        edges = portable.existing_edges(odb)
        events = portable.existing_event_keys(odb)
        with portable.deferred_triggers(odb):
            written = {
                "records": portable.insert(odb, "records", now.records),
                "sources": portable.insert(odb, "sources", [
                    s for s in bundle.lines["sources"] if s["memoryId"] in new_ids]),
                "edges": portable.insert(odb, "edges", [
                    e for e in bundle.lines["edges"]
                    if e["fromMemoryId"] in present and e["toMemoryId"] in present
                    and (e["fromMemoryId"], e["toMemoryId"], e["edgeType"]) not in edges]),
            }
        written["audit"] = portable.insert(odb, "audit", [
            a for a in bundle.lines["audit"]
            if not events or portable.event_key(a) not in events])
        written["vectors"] = store_embeddings(
            [(m, v) for m, v in vectors.items() if m in new_ids], embedder)
        applied = import_edits.apply_changes(odb, now.edits)
        add_event("import", [], after={**written, "edits": len(applied),
                                       "skipped": now.skipped,
                                       "conflictsLeftOut": len(now.left_out)},
                  actor="operator", reason=f"exported at {bundle.manifest['exported_at']}")
    expected.applied = applied
    return written


def import_folder(odb: OrchestratorDB, folder: Path, *, embedder: Embedder, batch_size: int,
                  skip_conflicts: bool = False, progress: Progress | None = None,
                  apply_edits: bool = False) -> dict[str, Any]:
    """Import the export in ``folder`` into ``odb`` (a writer's handle).

    Returns ``{"written": {records, sources, edges, audit, vectors}, "skipped",
    "conflicts", "edits", "vectorsFromFile", "seconds", "embedSeconds", "writeSeconds"}``
    (``edits``: the edited lines applied, with ``apply_edits``: memoryId, line,
    ``patched`` fields and/or ``supersededBy``)
    (``vectorsFromFile``: new memories whose vector came from the export's
    ``vectors.jsonl`` instead of the embedder; ``writeSeconds``: the one transaction,
    i.e. how long the write lock was held).

    Raises ImportRejected (nothing written: a bad file, line or field, named; a
    conflict without ``skip_conflicts``; an edited line without ``apply_edits``, or one
    an import cannot apply), ScopeViolation (an id or a manifest of another
    orchestrator), StorageError.
    """
    with _collector_paused():
        return _import(odb, folder, embedder, batch_size, skip_conflicts, progress,
                       apply_edits)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused for the block: an import holds hundreds of
    thousands of small dicts and lists until it ends, which the collector would walk
    again and again, finding nothing (a third of reading a large export)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _import(odb: OrchestratorDB, folder: Path, embedder: Embedder, batch_size: int,
            skip_conflicts: bool, progress: Progress | None, apply_edits: bool
            ) -> dict[str, Any]:
    started = time.monotonic()
    bundle = load(folder, odb.orchestrator_id, edited_ok=apply_edits)
    with odb.read():
        first = plan(odb, bundle, apply_edits)
    if first.refused:
        raise import_edits.edited(first.refused)
    if first.conflicts and not skip_conflicts:
        raise _conflict(first.conflicts)
    embedding = time.monotonic()
    given = read_vectors(folder, bundle, odb.orchestrator_id, embedder.version, embedder.dim)
    vectors = _embed(embedder, [r for r in first.records if r["memoryId"] not in given],
                     batch_size, progress)
    reused = {r["memoryId"]: given[r["memoryId"]] for r in first.records
              if r["memoryId"] in given and not r.get("forgotten") and r["content"]}
    writing = time.monotonic()
    written = _write(odb, bundle, first, {**vectors, **reused}, embedder.version, apply_edits)
    done = time.monotonic()
    report = {"written": written, "skipped": first.skipped, "conflicts": first.conflicts,
              "edits": first.applied,
              "vectorsFromFile": len(reused),
              "seconds": round(done - started, 3),
              "embedSeconds": round(writing - embedding, 3),
              # How long the write lock was held: what the shard's worker may wait.
              "writeSeconds": round(done - writing, 3)}
    odb.log.write("imported", folder=str(folder), written=written, skipped=first.skipped,
                  conflicts=len(first.conflicts))
    return report
