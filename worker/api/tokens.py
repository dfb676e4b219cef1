"""API tokens: each one bound to exactly one orchestratorId; only their hashes are kept.

A token reads ``om_<tokenId>_<secret>``: ``tokenId`` (12 hex digits) names it in
listings and revocations, ``secret`` is 32 random bytes (URL-safe base64). The store,
``<root>/api/tokens.json`` (mode 0600, replaced atomically: temporary file + rename),
holds per token its id, its orchestratorId, when it was created and the SHA-256 of
the whole token. A 256-bit random secret needs no slow hash: nobody can guess a
preimage, and the lookup by id plus :func:`hmac.compare_digest` keeps the check in
constant time for a given id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from orchmem.config import (
    ConfigError,
    MemoryNotFound,
    MemoryValidationError,
    Settings,
    check_orchestrator_id,
)
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.workspace.folders import Workspace
from orchmem.models.workspace.private import FILE_MODE, private_dir

#: The whole token: prefix, id, secret. Anything else is not a token of ours.
TOKEN_PATTERN = re.compile(r"^om_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
_TOKEN_ID = re.compile(r"^[0-9a-f]{12}$")
STORE_VERSION = 1


@dataclass(frozen=True)
class TokenRecord:
    """What the store keeps of one token (no secret)."""

    token_id: str
    orchestrator_id: str
    created_at: str
    sha256: str

    def public(self) -> dict[str, str]:
        """The record without its hash: what ``orchmem token list`` shows."""
        return {"tokenId": self.token_id, "orchestratorId": self.orchestrator_id,
                "createdAt": self.created_at}


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenStore:
    """The token file of one root. Thread-safe within a process; every change rewrites
    the file atomically, and :meth:`verify` re-reads it when it changed on disk (a
    token created or revoked by the CLI reaches a running server without a restart)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.path = settings.root / "api" / "tokens.json"
        self._lock = threading.Lock()
        self._cache: tuple[tuple[int, int], list[TokenRecord]] | None = None

    # -- reading ----------------------------------------------------------------

    def records(self) -> list[TokenRecord]:
        """Every stored token, oldest first (an absent file holds none)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return []
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if self._cache is not None and self._cache[0] == stamp:
                return list(self._cache[1])
            records = _parse(self.path)
            self._cache = (stamp, records)
            return list(records)

    def any(self) -> bool:
        """Whether at least one token exists (the server binds off loopback only then)."""
        return bool(self.records())

    def verify(self, token: str) -> TokenRecord | None:
        """The record of ``token``, or None when it is malformed, unknown or revoked."""
        match = TOKEN_PATTERN.fullmatch(token)
        if match is None:
            return None
        digest = token_hash(token)
        for record in self.records():
            if record.token_id == match.group(1) and hmac.compare_digest(record.sha256,
                                                                         digest):
                return record
        return None

    def of(self, orchestrator_id: str) -> list[TokenRecord]:
        """The tokens of one orchestrator, oldest first."""
        check_orchestrator_id(orchestrator_id)
        return [r for r in self.records() if r.orchestrator_id == orchestrator_id]

    # -- changing ---------------------------------------------------------------

    def create(self, orchestrator_id: str) -> tuple[str, TokenRecord]:
        """A new token for ``orchestrator_id``: returns the token (shown once) and its record.

        Raises MemoryValidationError for a malformed id and MemoryNotFound when the
        orchestrator has no memory folder (a token for nobody would be a typo kept).
        """
        check_orchestrator_id(orchestrator_id)
        workspace = Workspace.for_orchestrator(self.settings, orchestrator_id)
        if not workspace.memory_dir.is_dir():
            raise MemoryNotFound(
                f"unknown orchestrator {orchestrator_id!r}: no memory folder at "
                f"{workspace.memory_dir}. Write to it first (orchmem write) or check --root.")
        token_id = secrets.token_hex(6)
        token = f"om_{token_id}_{secrets.token_urlsafe(32)}"
        record = TokenRecord(token_id, orchestrator_id, format_ts(utc_now()), token_hash(token))
        with self._lock:
            self._save([*_parse(self.path), record])
        return token, record

    def revoke(self, orchestrator_id: str, token_id: str | None) -> list[str]:
        """Remove one token of ``orchestrator_id`` (``token_id``), or all of them (None);
        returns the ids removed. Raises MemoryNotFound for an id it does not have."""
        check_orchestrator_id(orchestrator_id)
        if token_id is not None and _TOKEN_ID.fullmatch(token_id) is None:
            raise MemoryValidationError(f"tokenId: {token_id[:40]!r} is not 12 hex digits",
                                        [{"path": "tokenId", "message": "12 hex digits"}])
        with self._lock:
            records = _parse(self.path)
            gone = [r.token_id for r in records if r.orchestrator_id == orchestrator_id
                    and token_id in (None, r.token_id)]
            if token_id is not None and not gone:
                raise MemoryNotFound(f"orchestrator {orchestrator_id!r} has no token "
                                     f"{token_id!r} (see orchmem token list)")
            self._save([r for r in records if r.token_id not in gone])
        return gone

    def _save(self, records: list[TokenRecord]) -> None:
        private_dir(self.path.parent)
        data = {"version": STORE_VERSION, "tokens": [asdict(r) for r in records]}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._cache = None


def _parse(path: Path) -> list[TokenRecord]:
    """The records of the token file; a damaged file fails closed (no token is valid)."""
    try:
        data: Any = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable token store ({exc}); fix or remove "
                                    "it and create the tokens again") from None
    try:
        return [TokenRecord(str(t["token_id"]), check_orchestrator_id(t["orchestrator_id"]),
                            str(t["created_at"]), str(t["sha256"])) for t in data["tokens"]]
    except (KeyError, TypeError, MemoryValidationError) as exc:
        raise ConfigError(f"{path}: malformed token store ({exc!r})") from None
