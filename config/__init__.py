"""Settings and the error hierarchy: the bottom layer of orchmem."""

from orchmem.config.errors import (
    BrokerUnavailable,
    ConfigError,
    EmbeddingError,
    ExtractionBudgetExceeded,
    ImportRejected,
    IngestRejected,
    MemoryCorrupt,
    MemoryDegraded,
    MemoryDisabled,
    MemoryErased,
    MemoryNotFound,
    MemoryValidationError,
    OrchmemError,
    ReplayRefused,
    ScopeViolation,
    StorageError,
    UnknownOrchestrator,
)
from orchmem.config.ids import ORCHESTRATOR_ID_PATTERN, check_no_case_twin, check_orchestrator_id
from orchmem.config.loading import load_settings
from orchmem.config.memory_settings import MemorySettings
from orchmem.config.settings import Settings

__all__ = [
    "ORCHESTRATOR_ID_PATTERN",
    "BrokerUnavailable",
    "ConfigError",
    "EmbeddingError",
    "ExtractionBudgetExceeded",
    "ImportRejected",
    "IngestRejected",
    "MemoryCorrupt",
    "MemoryDegraded",
    "MemoryDisabled",
    "MemoryErased",
    "MemoryNotFound",
    "MemorySettings",
    "MemoryValidationError",
    "OrchmemError",
    "ReplayRefused",
    "ScopeViolation",
    "Settings",
    "StorageError",
    "UnknownOrchestrator",
    "check_no_case_twin",
    "check_orchestrator_id",
    "load_settings",
]
