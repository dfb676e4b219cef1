"""A reference orchestrator that uses orchmem (``orchmem demo`` drives it)."""

from orchmem.examples.orchestrator import DiagnosticsReport, ReferenceOrchestrator, Reply, plan_for

__all__ = ["DiagnosticsReport", "ReferenceOrchestrator", "Reply", "plan_for"]
