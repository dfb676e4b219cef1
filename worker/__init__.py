"""orchmem's public API: what an orchestrator imports.

    from orchmem.worker import MemoryClient

Everything else may change between releases. The names are loaded when first used, so
that importing a submodule (the ``orchmem`` command line) does not load the client,
celery and the models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchmem.config import (
        BrokerUnavailable,
        ConfigError,
        MemoryCorrupt,
        MemoryDisabled,
        MemoryNotFound,
        MemoryValidationError,
        OrchmemError,
        ScopeViolation,
        Settings,
        load_settings,
    )
    from orchmem.models.recall.bundle import RecallBundle
    from orchmem.worker.client.handles import BulletinResult, Context, WriteHandle
    from orchmem.worker.client.memory_client import MemoryClient

#: Where each public name is defined.
_SOURCES = {
    **dict.fromkeys(["BrokerUnavailable", "ConfigError", "MemoryCorrupt", "MemoryDisabled",
                     "MemoryNotFound", "MemoryValidationError", "OrchmemError",
                     "ScopeViolation", "Settings", "load_settings"], "orchmem.config"),
    "RecallBundle": "orchmem.models.recall.bundle",
    "MemoryClient": "orchmem.worker.client.memory_client",
    **dict.fromkeys(["BulletinResult", "Context", "WriteHandle"], "orchmem.worker.client.handles"),
}

__all__ = [
    "BrokerUnavailable",
    "BulletinResult",
    "ConfigError",
    "Context",
    "MemoryClient",
    "MemoryCorrupt",
    "MemoryDisabled",
    "MemoryNotFound",
    "MemoryValidationError",
    "OrchmemError",
    "RecallBundle",
    "ScopeViolation",
    "Settings",
    "WriteHandle",
    "load_settings",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_SOURCES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names with the public ones not loaded yet."""
    return sorted({*globals(), *__all__})
