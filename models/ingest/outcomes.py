"""What the ingest scan says about a file, and where the file goes when the scan is
done with it.

A file's outcome is a :class:`FileOutcome`; a refused file's is a :class:`Rejection`,
whose reason is a stable code (docs/concepts/ingest.md#rejection-reasons):
``unsupported_extension``, ``too_large``, ``empty``, ``not_utf8``, ``binary``,
``symlink``, ``not_regular_file``, ``outside_workspace``, ``invalid_json``,
``schema_violation``, ``too_many_memories``, ``scope_violation``, ``extraction_budget``.

A scanned file moves to processed/ or rejected/. A move never replaces a file already
there: a taken name gets the sha256 prefix, then a counter (``report.pdf``,
``report.2.pdf``, ...). A rejected file lies beside ``<name>.reason.json``: ``{"file",
"sha256", "reason", "detail", "at"}``, written first (atomically), so that a file in
rejected/ always says why.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchmem.config import IngestRejected
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.workspace.folders import Workspace
from orchmem.models.workspace.private import narrow, private_dir, write_private

REASONS = (
    "unsupported_extension", "too_large", "empty", "not_utf8", "binary", "symlink",
    "not_regular_file", "outside_workspace", "invalid_json", "schema_violation",
    "too_many_memories", "scope_violation", "extraction_budget",
)
#: Not a rejection: the file changed or vanished while being read; the next scan retries.
CHANGED = "changed"


def reject(reason: str, detail: str) -> IngestRejected:
    """The error that refuses a file for ``reason`` (a code above, or ``CHANGED``)."""
    return IngestRejected(reason, detail[:1000])


@dataclass(frozen=True)
class Rejection:
    """Why a file is refused: a stable reason code and a human detail."""

    reason: str
    detail: str
    sha256: str = ""
    size: int = 0


@dataclass
class FileOutcome:
    """One file's line in the scan result (and in memory.log)."""

    file: str
    outcome: str  # ingested | rejected | duplicate | repaired | skipped
    sha256: str = ""
    memory_ids: list[str] = field(default_factory=list)
    reason: str | None = None
    detail: str | None = None
    #: When it was settled (``time.time_ns()``; 0: not yet): the end of its span.
    finished_ns: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "outcome": self.outcome}
        if self.sha256:
            out["sha256"] = self.sha256
        if self.memory_ids:
            out["memoryIds"] = self.memory_ids
        if self.reason:
            out["reason"], out["detail"] = self.reason, self.detail
        return out


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
    """Move the file at ``path`` (named as it was dropped) into ``processed/`` under a
    free name; returns where it went. Raises OSError when the move fails."""
    private_dir(workspace.processed_dir)
    target = _free_name(workspace.processed_dir, path.name, sha256)
    os.replace(path, target)
    narrow(target)
    return target


def move_to_rejected(workspace: Workspace, path: Path, sha256: str, reason: str,
                     detail: str) -> Path:
    """Write ``<name>.reason.json`` (atomically), then move the file at ``path`` (named
    as it was dropped) beside it; returns where it went. Raises OSError when it fails."""
    private_dir(workspace.rejected_dir)
    target = _free_name(workspace.rejected_dir, path.name, sha256)
    manifest = {"file": path.name, "sha256": sha256 or None, "reason": reason,
                "detail": detail, "at": format_ts(utc_now())}
    reason_path = target.with_name(target.name + ".reason.json")
    tmp = reason_path.with_name("." + reason_path.name + ".tmp")
    write_private(tmp, json.dumps(manifest, indent=2, ensure_ascii=False))
    os.replace(tmp, reason_path)
    os.replace(path, target)
    narrow(target)
    return target
