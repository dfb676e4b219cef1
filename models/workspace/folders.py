"""An orchestrator's folders, and the rule for paths that may be cited as sources.

Layout under the runtime root (docs/concepts/what-it-stores.md#files-per-orchestrator)::

    memory/memory.db            SQLite (WAL)
    memory/outbox.db            client-side outbox of published requests
    memory/ingest/              drop zone; processed/ and rejected/ below it, and
                                .inflight/ (the files a scan is handling)
    memory/bulletins/           latest.json + latest.md
    memory/logs/memory.log      JSON lines
    memory/quarantine/          corrupt databases kept aside for inspection
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchmem.config import (
    MemoryValidationError,
    ScopeViolation,
    Settings,
    check_no_case_twin,
    check_orchestrator_id,
)
from orchmem.models.workspace.private import private_dir


@dataclass(frozen=True)
class Workspace:
    """The folders of one orchestrator, and the roots its sources may live under."""

    orchestrator_id: str
    runtime_root: Path
    shared_paths: tuple[Path, ...] = ()

    @classmethod
    def for_orchestrator(cls, settings: Settings, orchestrator_id: str) -> Workspace:
        check_orchestrator_id(orchestrator_id)
        return cls(
            orchestrator_id=orchestrator_id,
            runtime_root=settings.runtime_root(orchestrator_id),
            shared_paths=tuple(settings.shared_paths(orchestrator_id)),
        )

    @property
    def memory_dir(self) -> Path:
        return self.runtime_root / "memory"

    @property
    def db_path(self) -> Path:
        return self.memory_dir / "memory.db"

    @property
    def outbox_path(self) -> Path:
        return self.memory_dir / "outbox.db"

    @property
    def ingest_dir(self) -> Path:
        return self.memory_dir / "ingest"

    @property
    def processed_dir(self) -> Path:
        return self.ingest_dir / "processed"

    @property
    def rejected_dir(self) -> Path:
        return self.ingest_dir / "rejected"

    @property
    def inflight_dir(self) -> Path:
        """Where a scan keeps the files it took from ingest/ until they are moved on."""
        return self.ingest_dir / ".inflight"

    @property
    def bulletins_dir(self) -> Path:
        return self.memory_dir / "bulletins"

    @property
    def logs_dir(self) -> Path:
        return self.memory_dir / "logs"

    @property
    def log_path(self) -> Path:
        return self.logs_dir / "memory.log"

    @property
    def quarantine_dir(self) -> Path:
        return self.memory_dir / "quarantine"

    @property
    def backups_dir(self) -> Path:
        return self.memory_dir / "backups"

    @property
    def degraded_marker(self) -> Path:
        """Present while memory is read-only after a failed migration
        (models/storage/db/backup.py)."""
        return self.memory_dir / "DEGRADED.json"

    @property
    def disabled_marker(self) -> Path:
        return self.memory_dir / "DISABLED.json"

    def ensure(self) -> None:
        """Create the folder layout (idempotent), every folder it makes 0700.

        A folder that would resolve outside the workspace (below an ``ingest/`` that is a
        symlink to elsewhere, say) is not created: nothing is ever made outside it, and
        the ingest scan refuses such a folder with ``outside_workspace``.
        """
        roots = self.allowed_roots()
        for folder in (
            self.ingest_dir,
            self.processed_dir,
            self.rejected_dir,
            self.bulletins_dir,
            self.logs_dir,
        ):
            if is_within(os.path.realpath(folder), roots):
                private_dir(folder)

    def check_no_case_twin(self) -> None:
        """Refuse to create this orchestrator beside a folder of the same name but for case.

        Called where its database is created, not on every open, so that orchestrators
        that already exist keep working. Raises MemoryValidationError naming both ids.
        """
        folder = self.runtime_root
        if folder.name != self.orchestrator_id:
            return  # an explicit runtime_root from settings: its name is not an id
        try:
            names = [entry.name for entry in os.scandir(folder.parent) if entry.is_dir()]
        except FileNotFoundError:
            return  # the first orchestrator of this root
        check_no_case_twin(self.orchestrator_id, names)

    def allowed_roots(self) -> list[str]:
        return [os.path.realpath(p) for p in (self.runtime_root, *self.shared_paths)]

    def canonical_source_path(self, raw: object, where: str = "source.sourcePath") -> str:
        """Resolve ``raw`` to its absolute canonical path, inside this workspace.

        Raises MemoryValidationError for a value that is not an absolute path, and
        ScopeViolation when the canonical path (symlinks and ``..`` resolved) leaves the
        orchestrator's runtime root and its shared-workspace allowlist.
        """
        if not isinstance(raw, str) or not raw:
            raise _invalid(where, "must be a non-empty string")
        if "\x00" in raw or len(raw) > 4096:
            raise _invalid(where, "must not contain NUL bytes or exceed 4096 characters")
        if not os.path.isabs(raw):
            raise _invalid(where, f"must be an absolute path, got {raw[:200]!r}")
        if is_within(os.path.normpath(raw), SYSTEM_ROOTS):
            raise ScopeViolation(f"{where}: paths under /proc, /dev and /sys are refused")
        canonical = os.path.realpath(raw)
        if is_within(canonical, SYSTEM_ROOTS) or not is_within(canonical,
                                                                self.allowed_roots()):
            # the rule only: neither the resolved path nor the workspace's folder
            raise ScopeViolation(
                f"{where}: outside the workspace of orchestrator {self.orchestrator_id!r} "
                "once links are resolved; cite files inside it or under its shared_paths")
        return canonical


#: Kernel and device trees: never a memory's source, whatever the workspace allows.
SYSTEM_ROOTS = ("/proc", "/dev", "/sys")


#: Validation context for data read back from storage (a reader's answer, a bundle):
#: a memory read back is not new input, and its sourcePath was checked when written.
STORED_DATA: dict[str, Any] = {"stored": True}


def stored_source_path(value: str) -> str:
    """A sourcePath read back from storage: checked to be one, not resolved again (the
    reading host may not have the orchestrator's workspace). Raises ValueError."""
    if not value or len(value) > 4096 or "\x00" in value or not os.path.isabs(value):
        raise ValueError("must be an absolute path")
    return value


def is_within(path: str, roots: Iterable[str]) -> bool:
    """True when the canonical ``path`` is one of ``roots`` or below one of them."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _invalid(where: str, message: str) -> MemoryValidationError:
    return MemoryValidationError(f"{where}: {message}", [{"path": where, "message": message}])
