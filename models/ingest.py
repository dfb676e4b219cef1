"""The ingest pipeline: files dropped in ``memory/ingest/`` become memories exactly once.

For each file directly in ``ingest/`` (sorted by name; hidden, ``.tmp`` and ``.part``
files and files younger than ``min_file_age_s`` are left for later):

1. **inspect** - a regular file, not a symlink, canonical path inside the workspace,
   a supported extension, within the size limit, UTF-8 text; parsed (``.json`` as
   explicit records, ``.md``/``.txt`` through the document extractor) and validated.
2. **commit** - memories, edges and an ``ingest_manifest`` row (file, sha256, size,
   outcome, memoryIds) in one transaction, idempotent on ``ingest-<sha256>``.
3. **finish** - the file moves to ``processed/`` (or ``rejected/`` beside a
   ``<name>.reason.json``), then the manifest row is marked moved.

A crash before the commit leaves nothing: the next scan starts over. A crash after
the commit and before the move leaves a manifest row not yet marked moved: the next
scan sees the same sha256 and only finishes the move. A file whose content was
already ingested is a ``duplicate``: moved to ``processed/``, nothing written twice.
A move never replaces a file already in ``processed/`` or ``rejected/``: a taken name
gets the sha256 prefix, then a counter (``report.pdf``, ``report.2.pdf``, ...).

A scan whose ``ingest/`` (or its ``processed/``/``rejected/``) resolves outside the
workspace, e.g. a symlinked folder, is refused whole (``outside_workspace``) before
anything there is created, moved or written. A file that changes or disappears
between its checks and its read is left for the next scan (skipped, ``changed``).

Rejection reasons are stable codes (README lists them): ``unsupported_extension``,
``too_large``, ``empty``, ``not_utf8``, ``binary``, ``symlink``, ``not_regular_file``,
``outside_workspace``, ``invalid_json``, ``schema_violation``, ``too_many_memories``,
``scope_violation``, ``extraction_budget``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from orchmem.config import IngestRejected, MemoryNotFound, MemoryValidationError, ScopeViolation
from orchmem.config.errors import ExtractionBudgetExceeded
from orchmem.config.settings import IngestSettings

from .database import OrchestratorDB
from .extraction import ExtractionBudget, extract_document
from .reconcile import Proposed
from .schema import (
    EdgeInput,
    MemoryInput,
    WireModel,
    format_ts,
    utc_now,
    validate,
)
from .store import add_event
from .tables import IngestManifestRow
from .workspace import Workspace, is_within
from .writeback import write_memories

#: Adds vectors to proposals: ``(proposals) -> (proposals, embedder version or None)``.
Embed = Callable[[list[Proposed]], tuple[list[Proposed], str | None]]
EXTENSIONS = frozenset({".txt", ".md", ".json"})
#: Deepest JSON nesting accepted (json.loads recurses; a hostile file must not).
MAX_JSON_DEPTH = 64
_IGNORED = re.compile(r"^\.|\.(?:tmp|part|swp)$|~$")

REASONS = (
    "unsupported_extension", "too_large", "empty", "not_utf8", "binary", "symlink",
    "not_regular_file", "outside_workspace", "invalid_json", "schema_violation",
    "too_many_memories", "scope_violation", "extraction_budget",
)
#: Not a rejection: the file changed or vanished while being read; the next scan retries.
CHANGED = "changed"


class IngestFile(WireModel):
    memories: list[dict[str, Any]] = Field(default_factory=list)
    edges: list[EdgeInput] = Field(default_factory=list)


@dataclass
class Parsed:
    """A file that passed inspection, ready to commit."""

    path: Path
    name: str
    sha256: str
    size: int
    proposals: list[Proposed]
    edges: list[EdgeInput] = field(default_factory=list)


@dataclass
class FileOutcome:
    file: str
    outcome: str  # ingested | rejected | duplicate | repaired | skipped
    sha256: str = ""
    memory_ids: list[str] = field(default_factory=list)
    reason: str | None = None
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "outcome": self.outcome}
        if self.sha256:
            out["sha256"] = self.sha256
        if self.memory_ids:
            out["memoryIds"] = self.memory_ids
        if self.reason:
            out["reason"], out["detail"] = self.reason, self.detail
        return out


# ---------------------------------------------------------------------------- discover


def discover(workspace: Workspace, settings: IngestSettings, now: float | None = None
             ) -> tuple[list[Path], list[FileOutcome]]:
    """Entries directly in ingest/ to handle now, and those left for a later scan."""
    now = time.time() if now is None else now
    ready, later = [], []
    try:
        entries = sorted(os.scandir(workspace.ingest_dir), key=lambda e: e.name)
    except FileNotFoundError:
        return [], []
    for entry in entries:
        if _IGNORED.search(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed since the listing: nothing to do
        if stat.S_ISDIR(info.st_mode):
            continue  # processed/, rejected/ and any operator folder
        if stat.S_ISREG(info.st_mode) and now - info.st_mtime < settings.min_file_age_s:
            later.append(FileOutcome(entry.name, "skipped", reason="too_new",
                                     detail=f"modified less than {settings.min_file_age_s}s ago"))
            continue
        ready.append(Path(entry.path))
    return ready, later


# ---------------------------------------------------------------------------- inspect


def _reject(reason: str, detail: str) -> IngestRejected:
    return IngestRejected(reason, detail[:1000])


def read_checked(path: Path, workspace: Workspace, settings: IngestSettings) -> bytes:
    """The file's bytes after the file-system checks; raises IngestRejected.

    The bytes come from the very file checked: it is opened without following a
    symlink and without blocking, and the open descriptor must still be that regular
    file, of that size (reason ``CHANGED`` when it was replaced or is being written).
    """
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise _reject(CHANGED, f"{path.name} disappeared before it was read") from None
    if stat.S_ISLNK(info.st_mode):
        raise _reject("symlink", f"{path.name} is a symbolic link; drop the file itself")
    if not stat.S_ISREG(info.st_mode):
        raise _reject("not_regular_file", f"{path.name} is not a regular file")
    canonical = os.path.realpath(path)
    if not is_within(canonical, workspace.allowed_roots()):
        raise _reject("outside_workspace",
                      f"{path.name} resolves to {canonical}, outside the orchestrator's workspace")
    if path.suffix.lower() not in EXTENSIONS:
        raise _reject("unsupported_extension",
                      f"{path.suffix or '(none)'} is not one of {', '.join(sorted(EXTENSIONS))}")
    limit = int(settings.max_file_size_mb * 1024 * 1024)
    if info.st_size > limit:
        raise _reject("too_large", f"{info.st_size} bytes; the limit is {limit} "
                      f"(memory.ingest.max_file_size_mb = {settings.max_file_size_mb})")
    fd = _open_unfollowed(path)
    with os.fdopen(fd, "rb") as fh:
        _check_same_file(path.name, info, os.fstat(fd))
        data = fh.read(limit + 1)
    if len(data) != info.st_size:
        raise _reject(CHANGED, f"{path.name} changed size while being read "
                      f"({info.st_size} bytes checked, {len(data)} read)")
    return data


#: Flags of the one open of an ingest file. O_NOFOLLOW: a file swapped for a symlink
#: after the checks is refused, not followed. O_NONBLOCK: one swapped for a FIFO makes
#: open return at once instead of waiting for a writer (it blocks the worker forever).
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_NOCTTY", 0))


def _open_unfollowed(path: Path) -> int:
    try:
        return os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise _reject(CHANGED, f"{path.name} disappeared before it was read") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _reject("symlink", f"{path.name} became a symbolic link while being "
                          "checked; drop the file itself") from None
        raise _reject("not_regular_file", f"{path.name}: {exc.strerror}") from None


def _check_same_file(name: str, checked: os.stat_result, opened: os.stat_result) -> None:
    """The descriptor must be the regular file that passed the checks (same inode, size)."""
    if not stat.S_ISREG(opened.st_mode):
        raise _reject("not_regular_file", f"{name} was replaced by something other than a "
                      "regular file while being checked")
    if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
        raise _reject(CHANGED, f"{name} was replaced while being checked")
    if opened.st_size != checked.st_size:
        raise _reject(CHANGED, f"{name} changed size while being checked "
                      f"({checked.st_size} -> {opened.st_size} bytes)")


def decode(data: bytes, name: str) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _reject("not_utf8", f"{name}: byte {exc.start} is not UTF-8 ({exc.reason})") from None
    if "\x00" in text or re.search(r"[\x01-\x08\x0e-\x1f]", text):
        raise _reject("binary", f"{name} contains NUL or control bytes: not a text file")
    if not text.strip():
        raise _reject("empty", f"{name} has no text")
    return text


def _json_depth(text: str) -> int:
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse(path: Path, text: str, workspace: Workspace, settings: IngestSettings,
          max_content_chars: int) -> tuple[list[Proposed], list[EdgeInput]]:
    """Proposed memories (and edges) of a file's text; raises IngestRejected."""
    canonical = os.path.realpath(path)
    provenance = {"sourceType": "ingest_file", "sourcePath": canonical}
    if path.suffix.lower() == ".json":
        proposals, edges = _parse_json(text, provenance, workspace, max_content_chars)
    else:
        budget = ExtractionBudget(settings.extraction_budget_chars, settings.extraction_budget_s)
        try:
            candidates = extract_document(text, budget)
        except ExtractionBudgetExceeded as exc:
            raise _reject("extraction_budget", f"{path.name}: {exc.message} "
                          "(memory.ingest.extraction_budget_chars, extraction_budget_s)") from None
        proposals = []
        for index, candidate in enumerate(candidates):
            memory = validate(MemoryInput, {
                "type": candidate.type.value, "content": candidate.content[:max_content_chars],
                "importance": candidate.importance, "confidence": candidate.confidence,
                "source": {**provenance, "capturedBy": "extractor"}},
                workspace=workspace, max_content_chars=max_content_chars,
                where=f"candidate.{index}")
            proposals.append(Proposed.extracted(memory, candidate))
        edges = []
    if not proposals:
        raise _reject("empty", f"{path.name} holds no memory (only headings or blank lines?)")
    if len(proposals) > settings.max_memories_per_file:
        raise _reject("too_many_memories", f"{len(proposals)} memories; the limit is "
                      f"{settings.max_memories_per_file} (memory.ingest.max_memories_per_file)")
    return proposals, edges


def _parse_json(text: str, provenance: dict[str, str], workspace: Workspace,
                max_content_chars: int) -> tuple[list[Proposed], list[EdgeInput]]:
    if _json_depth(text) > MAX_JSON_DEPTH:
        raise _reject("invalid_json", f"nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _reject("invalid_json", str(exc)) from None
    if isinstance(data, dict) and ("memories" in data or "edges" in data):
        shape = validate(IngestFile, data)
        records, edges = shape.memories, shape.edges
    elif isinstance(data, dict):
        records, edges = [data], []
    elif isinstance(data, list):
        records, edges = data, []
    else:
        raise _reject("schema_violation", f"expected an object or a list of objects, "
                      f"got {type(data).__name__}")
    proposals = []
    for index, record in enumerate(records):
        where = f"memories.{index}"
        if not isinstance(record, dict):
            raise _reject("schema_violation", f"{where}: expected an object, "
                          f"got {type(record).__name__}")
        given = record.get("source") or {}
        if not isinstance(given, dict):
            raise _reject("schema_violation", f"{where}.source: expected an object")
        for name in ("sourceType", "sourcePath"):
            if name in given and given[name] != provenance[name]:
                raise _reject("schema_violation", f"{where}.source.{name}: an ingest record's "
                              f"{name} is the file itself ({provenance[name]})")
        source = {"capturedBy": "user", **given, **provenance}
        memory = validate(MemoryInput, {**record, "source": source}, workspace=workspace,
                          max_content_chars=max_content_chars, where=where)
        proposals.append(Proposed.explicit(memory))
    return proposals, edges


@dataclass(frozen=True)
class Rejection:
    """Why a file is refused: a stable reason code and a human detail."""

    reason: str
    detail: str
    sha256: str = ""
    size: int = 0


def inspect(path: Path, workspace: Workspace, settings: IngestSettings,
            max_content_chars: int) -> Parsed | Rejection:
    """Check, read, decode, parse and validate one file."""
    try:
        data = read_checked(path, workspace, settings)
    except IngestRejected as exc:
        return Rejection(exc.reason, exc.detail, size=_size(path))
    sha256 = hashlib.sha256(data).hexdigest()
    try:
        text = decode(data, path.name)
        proposals, edges = parse(path, text, workspace, settings, max_content_chars)
    except IngestRejected as exc:
        return Rejection(exc.reason, exc.detail, sha256, len(data))
    except ScopeViolation as exc:
        return Rejection("scope_violation", str(exc)[:1000], sha256, len(data))
    except MemoryValidationError as exc:
        return Rejection("schema_violation", exc.message[:1000], sha256, len(data))
    return Parsed(path=path, name=path.name, sha256=sha256, size=len(data),
                  proposals=proposals, edges=edges)


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


# ---------------------------------------------------------------------------- commit


def manifest_for(sha256: str) -> IngestManifestRow | None:
    """The newest ingested manifest row for this content (inside a bound block)."""
    return (IngestManifestRow.select()
            .where(IngestManifestRow.sha256 == sha256, IngestManifestRow.outcome == "ingested")
            .order_by(IngestManifestRow.id.desc()).first())


def commit(odb: OrchestratorDB, parsed: Parsed, embed: Embed,
           task: str) -> dict[str, Any] | Rejection:
    """Write the file's memories and its manifest row in one transaction.

    ``embed(proposals) -> (proposals, embedder_version | None)`` adds vectors first.
    Edges to memories this orchestrator lacks reject the file (nothing is written).
    """
    proposals, embedder = embed(parsed.proposals)

    def record(result: dict[str, Any]) -> None:
        IngestManifestRow.create(
            file_name=parsed.name, sha256=parsed.sha256, size=parsed.size, outcome="ingested",
            memory_ids=json.dumps(result["memoryIds"]), at=format_ts(utc_now()))
        add_event("ingest", result["created"], after={"file": parsed.name,
                                                      "sha256": parsed.sha256},
                  actor="extractor", key=f"ingest-{parsed.sha256}")

    try:
        return write_memories(odb, key=f"ingest-{parsed.sha256}", task=task,
                              memories=proposals, edges=parsed.edges, embedder=embedder,
                              also=record)
    except ScopeViolation as exc:
        return Rejection("scope_violation", str(exc)[:1000], parsed.sha256, parsed.size)
    except (MemoryValidationError, MemoryNotFound) as exc:
        return Rejection("schema_violation", str(exc)[:1000], parsed.sha256, parsed.size)


def record_outcome(odb: OrchestratorDB, name: str, sha256: str, size: int, outcome: str,
                   memory_ids: list[str], reason: str | None = None,
                   detail: str | None = None) -> int:
    with odb.write():
        row = IngestManifestRow.create(file_name=name, sha256=sha256, size=size, outcome=outcome,
                                       memory_ids=json.dumps(memory_ids), reason=reason,
                                       detail=detail, at=format_ts(utc_now()))
        return int(row.id)


def mark_moved(odb: OrchestratorDB, row_ids: list[int]) -> None:
    with odb.write():
        IngestManifestRow.update(moved=1).where(IngestManifestRow.id.in_(row_ids)).execute()


# ---------------------------------------------------------------------------- finish


#: Longest name a move may pick: NAME_MAX (255 bytes on Linux file systems) less the
#: ".<name>.reason.json.tmp" written beside a rejected file.
_MAX_NAME = 255 - len("..reason.json.tmp")
#: A longer "extension" is kept as part of the stem, so the counter always fits.
_MAX_SUFFIX = 16
#: Counters tried before random suffixes, which keep the search short for a name
#: rejected thousands of times.
_MAX_COUNTER = 100


def _free_name(folder: Path, name: str, sha256: str) -> Path:
    """A name in ``folder`` that neither a file nor a reason file uses yet.

    ``name`` itself, else ``stem.<sha256[:12]>.ext``, else a counter before the
    extension. Only this orchestrator's single writer moves files here (one worker
    process per shard, concurrency 1), so a name found free stays free until the move.
    """
    return next(folder / candidate for candidate in _candidates(name, sha256)
                if not os.path.lexists(folder / candidate)
                and not os.path.lexists(folder / f"{candidate}.reason.json"))


def _candidates(name: str, sha256: str) -> Iterator[str]:
    stem, suffix = os.path.splitext(name)
    if len(os.fsencode(suffix)) > _MAX_SUFFIX:
        stem, suffix = name, ""
    tag = f".{sha256[:12]}" if sha256 else ""
    yield _fit(stem, suffix)
    if tag:
        yield _fit(stem, tag + suffix)
    for counter in range(2, _MAX_COUNTER):
        yield _fit(stem, f"{tag}.{counter}{suffix}")
    while True:
        yield _fit(stem, f"{tag}.{uuid.uuid4().hex[:12]}{suffix}")


def _fit(stem: str, tail: str) -> str:
    """``stem + tail``, the stem shortened until the name fits ``_MAX_NAME`` bytes."""
    while len(os.fsencode(stem + tail)) > _MAX_NAME:
        stem = stem[:-1]
    return stem + tail


def move_to_processed(workspace: Workspace, path: Path, sha256: str) -> Path:
    """Move the file into ``processed/`` under a free name; returns where it went."""
    workspace.processed_dir.mkdir(parents=True, exist_ok=True)
    target = _free_name(workspace.processed_dir, path.name, sha256)
    os.replace(path, target)
    return target


def move_to_rejected(workspace: Workspace, path: Path, sha256: str, reason: str,
                     detail: str) -> Path:
    """Write ``<name>.reason.json`` (atomically), then move the file beside it."""
    workspace.rejected_dir.mkdir(parents=True, exist_ok=True)
    target = _free_name(workspace.rejected_dir, path.name, sha256)
    manifest = {"file": path.name, "sha256": sha256 or None, "reason": reason,
                "detail": detail, "at": format_ts(utc_now())}
    reason_path = target.with_name(target.name + ".reason.json")
    tmp = reason_path.with_name("." + reason_path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, reason_path)
    os.replace(path, target)
    return target


# ---------------------------------------------------------------------------- scan


def process(odb: OrchestratorDB, path: Path, embed: Embed, task: str) -> FileOutcome:
    """One file through inspect, commit and finish; see the module docstring."""
    workspace, settings = odb.workspace, odb.memory.ingest
    inspected = inspect(path, workspace, settings, odb.memory.writeback.max_content_chars)
    if isinstance(inspected, Rejection) and inspected.reason == CHANGED:
        return _logged(odb, FileOutcome(path.name, "skipped", reason=CHANGED,
                                        detail=inspected.detail))
    if isinstance(inspected, Parsed):
        with odb.read():
            earlier = manifest_for(inspected.sha256)
            earlier_id, earlier_moved = (earlier.id, earlier.moved) if earlier else (0, 1)
            earlier_ids = json.loads(earlier.memory_ids) if earlier else []
        if earlier is not None and not earlier_moved:
            # Committed by a scan that stopped before the move: only the move is left.
            move_to_processed(workspace, path, inspected.sha256)
            mark_moved(odb, [earlier_id])
            return _logged(odb, FileOutcome(path.name, "repaired", inspected.sha256,
                                            earlier_ids))
        if earlier is not None:
            dup_id = record_outcome(odb, path.name, inspected.sha256, inspected.size,
                                    "duplicate", earlier_ids, "duplicate",
                                    "this content was ingested before")
            move_to_processed(workspace, path, inspected.sha256)
            mark_moved(odb, [dup_id])
            return _logged(odb, FileOutcome(path.name, "duplicate", inspected.sha256,
                                            earlier_ids, "duplicate",
                                            "this content was ingested before"))
        committed = commit(odb, inspected, embed, task)
        if isinstance(committed, dict):
            move_to_processed(workspace, path, inspected.sha256)
            with odb.read():
                ingested = manifest_for(inspected.sha256)
            row_id = ingested.id if ingested is not None else record_outcome(
                odb, path.name, inspected.sha256, inspected.size, "ingested",
                list(committed["memoryIds"]))
            mark_moved(odb, [row_id])
            return _logged(odb, FileOutcome(path.name, "ingested", inspected.sha256,
                                            list(committed["memoryIds"])))
        inspected = committed
    rejected_id = record_outcome(odb, path.name, inspected.sha256, inspected.size, "rejected",
                                 [], inspected.reason, inspected.detail)
    move_to_rejected(workspace, path, inspected.sha256, inspected.reason, inspected.detail)
    mark_moved(odb, [rejected_id])
    return _logged(odb, FileOutcome(path.name, "rejected", inspected.sha256, [],
                                    inspected.reason, inspected.detail))


def settle_moves(odb: OrchestratorDB) -> None:
    """Mark rows moved whose file already left ingest/ (a crash between move and mark)."""
    with odb.read():
        pending = [(r.id, r.file_name) for r in IngestManifestRow.select().where(
            IngestManifestRow.moved == 0)]
    done = [row_id for row_id, name in pending
            if not os.path.lexists(odb.workspace.ingest_dir / name)]
    if done:
        mark_moved(odb, done)


def _logged(odb: OrchestratorDB, outcome: FileOutcome) -> FileOutcome:
    odb.log.write("ingest_file", file=outcome.file, outcome=outcome.outcome,
                  sha256=outcome.sha256 or None, memories=len(outcome.memory_ids),
                  reason=outcome.reason, detail=outcome.detail)
    return outcome


def outside_workspace(workspace: Workspace) -> str | None:
    """Why the ingest folders resolve outside the workspace, or None when they do not.

    Checked before the scan creates or moves anything: with ``ingest/`` a symlink to
    another folder, processed/ and rejected/ would be made, and files moved, there.
    """
    roots = workspace.allowed_roots()
    for folder in (workspace.ingest_dir, workspace.processed_dir, workspace.rejected_dir):
        canonical = os.path.realpath(folder)
        if not is_within(canonical, roots):
            return (f"{folder} resolves to {canonical}, outside the orchestrator's workspace; "
                    "nothing there was read, moved or written")
    return None


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
    outcomes = [process(odb, path, embed, task) for path in batch] + later
    counts = {name: sum(1 for o in outcomes if o.outcome == name)
              for name in ("ingested", "rejected", "duplicate", "repaired", "skipped")}
    return {**counts, "remaining": len(ready) - len(batch),
            "files": [o.to_dict() for o in outcomes]}
