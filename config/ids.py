"""The orchestratorId rule, shared by settings and the domain schema.

An orchestratorId becomes a folder name and part of a queue name, so it is checked
before it touches either: ASCII letters, digits, ``_ . -``, starting with a letter or
digit, at most 64 characters (DESIGN.md).
"""

from __future__ import annotations

import re

from .errors import MemoryValidationError

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
