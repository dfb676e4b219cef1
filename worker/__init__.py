"""orchmem's public API: what an orchestrator imports.

    from orchmem.worker import MemoryClient

Everything else may change between releases.
"""

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
from orchmem.models.recall import RecallBundle

from .client import MemoryClient
from .handles import BulletinResult, Context, WriteHandle

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
