"""What the ingest scan says about a file: its outcome, or why it was refused.

Rejection reasons are stable codes (README lists them): ``unsupported_extension``,
``too_large``, ``empty``, ``not_utf8``, ``binary``, ``symlink``, ``not_regular_file``,
``outside_workspace``, ``invalid_json``, ``schema_violation``, ``too_many_memories``,
``scope_violation``, ``extraction_budget``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchmem.config import IngestRejected

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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "outcome": self.outcome}
        if self.sha256:
            out["sha256"] = self.sha256
        if self.memory_ids:
            out["memoryIds"] = self.memory_ids
        if self.reason:
            out["reason"], out["detail"] = self.reason, self.detail
        return out
