"""The one error hierarchy of orchmem.

It lives in the bottom layer (config) so that every layer above can raise and catch
these without importing upward. Every class can be rebuilt from its ``args`` alone,
because Celery sends a task's exception to the caller as ``(type, args)`` in JSON.
"""

from __future__ import annotations

from typing import Any


class OrchmemError(Exception):
    """Base of every error orchmem raises on purpose."""

    #: A short machine-readable code, stable across releases.
    code = "error"

    def __init__(self, message: str, *args: Any) -> None:
        super().__init__(message, *args)

    @property
    def message(self) -> str:
        return str(self.args[0])

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready dict: ``{"error": code, "message": ...}``."""
        return {"error": self.code, "message": self.message}


class ConfigError(OrchmemError):
    """Raised when settings are invalid: unknown key, wrong type, out-of-range value."""

    code = "config"


class MemoryValidationError(OrchmemError, ValueError):
    """Raised when a memory, edge, source or task payload breaks the schema.

    ``errors`` lists ``{"path": "memories.0.importance", "message": ...}`` items.
    """

    code = "validation"

    def __init__(self, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message, errors or [])

    @property
    def errors(self) -> list[dict[str, str]]:
        return list(self.args[1]) if len(self.args) > 1 else []

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "errors": self.errors}


class MemoryErased(MemoryValidationError):
    """Raised when an edit needs the content of a memory that a hard forget erased (a
    ``recover``, say): only its tombstone is left, so nothing can bring it back."""

    code = "erased"


class ScopeViolation(OrchmemError, PermissionError):
    """Raised when a request for one orchestrator names another one's memory, file or queue.

    It always fails closed: nothing is read or written, and the attempt is logged.
    """

    code = "scope_violation"


class ReplayRefused(OrchmemError):
    """A run in replay mode was asked for a tool call not on its allowlist: the caller
    must not execute it (the refusal is in the execution log)."""

    code = "replay_refused"


class MemoryNotFound(OrchmemError, LookupError):
    """Raised when an edit or a lookup names a memoryId this orchestrator does not have."""

    code = "not_found"


class UnknownOrchestrator(OrchmemError, LookupError):
    """Raised when a command names an orchestrator that has no memory folder under the root."""

    code = "not_found"


class MemoryCorrupt(OrchmemError):
    """Raised when an orchestrator's memory.db fails its integrity check at open.

    That orchestrator's memory is disabled; every other orchestrator goes on.
    """

    code = "corrupt"


class MemoryDisabled(OrchmemError):
    """Raised when memory is switched off for an orchestrator (by settings or after corruption)."""

    code = "disabled"


class StorageError(OrchmemError):
    """Raised when SQLite or the file system fails: locked past busy_timeout, full, read-only."""

    code = "storage"


class EmbeddingError(OrchmemError):
    """Raised when the embedding model cannot be loaded or fails to encode."""

    code = "embedding"


class BrokerUnavailable(OrchmemError):
    """Raised when no broker can be reached: none configured and no embedded one running."""

    code = "broker_unavailable"


class ExtractionBudgetExceeded(OrchmemError):
    """Raised when extracting a document needs more work than its budget allows.

    Ingest turns it into the rejection reason ``extraction_budget``
    (``memory.ingest.extraction_budget_chars`` and ``extraction_budget_s``).
    """

    code = "extraction_budget"


class IngestRejected(OrchmemError):
    """Raised when an ingest file is rejected; ``reason`` is a stable machine-readable code."""

    code = "ingest_rejected"

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail)

    @property
    def reason(self) -> str:
        return str(self.args[0])

    @property
    def detail(self) -> str:
        return str(self.args[1])

    @property
    def message(self) -> str:
        return f"{self.reason}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "reason": self.reason, "detail": self.detail}


class ImportRejected(OrchmemError):
    """Raised when ``orchmem import`` refuses a folder, or ``orchmem rebuild --from-log``
    the log's snapshots; nothing of it was written.

    ``reason`` is a stable code (``manifest``, ``hash_mismatch``, ``missing_file``,
    ``line_too_long``, ``bad_json``, ``bad_field``, ``order``, ``count_mismatch``,
    ``dangling``, ``conflict``, ``edited``); ``errors`` lists ``{"path":
    "records.jsonl:12:importance", "message": ...}`` items, one per offending line and
    field.
    """

    code = "import_rejected"

    def __init__(self, reason: str, message: str,
                 errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(reason, message, errors or [])

    @property
    def reason(self) -> str:
        return str(self.args[0])

    @property
    def message(self) -> str:
        return f"{self.reason}: {self.args[1]}"

    @property
    def errors(self) -> list[dict[str, str]]:
        return list(self.args[2])

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "reason": self.reason, "errors": self.errors}


class MemoryDegraded(OrchmemError):
    """Raised when a write reaches an orchestrator whose memory is read-only after a failed
    migration: recall and the bulletin still work; the write stays in the outbox."""

    code = "degraded"
