"""The orchestratorId rule, shared by settings and the domain schema.

An orchestratorId becomes a folder name and part of a queue name, so it is checked
before it touches either: ASCII letters, digits, ``_ . -``, starting with a letter or
digit, at most 64 characters (docs/architecture.md#identifiers-and-isolation).

Ids are case-sensitive, but the folders of macOS and Windows are not: there "Bot" opens
"bot"'s folder. So a new orchestrator whose id equals an existing one's but for case is
refused (:func:`check_no_case_twin`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from orchmem.config.errors import MemoryValidationError

ORCHESTRATOR_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_ORCHESTRATOR_ID = re.compile(ORCHESTRATOR_ID_PATTERN, re.ASCII)


def check_orchestrator_id(value: object, where: str = "orchestratorId") -> str:
    """Return ``value`` if it is a valid orchestratorId, else raise MemoryValidationError."""
    if not isinstance(value, str) or _ORCHESTRATOR_ID.fullmatch(value) is None:
        shown = repr(value)[:80]
        message = (
            f"{where}: invalid orchestratorId {shown}: use 1-64 ASCII letters, digits, "
            "'_', '.' or '-', starting with a letter or digit"
        )
        raise MemoryValidationError(message, [{"path": where, "message": message}])
    return value


def check_no_case_twin(orchestrator_id: str, existing: Iterable[str]) -> str:
    """Return ``orchestrator_id`` unless one of ``existing`` equals it but for case.

    Raises MemoryValidationError naming both ids: on a case-insensitive file system
    (macOS, Windows) the two would share one folder, and one database.
    """
    folded = orchestrator_id.casefold()
    for other in existing:
        if other != orchestrator_id and other.casefold() == folded:
            message = (
                f"orchestratorId {orchestrator_id!r} differs only in case from the existing "
                f"orchestrator {other!r}: on macOS and Windows both would use one folder. "
                f"Use {other!r}, or an id that differs in more than case"
            )
            raise MemoryValidationError(message, [{"path": "orchestratorId",
                                                   "message": message}])
    return orchestrator_id
