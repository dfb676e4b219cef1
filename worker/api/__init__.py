"""The HTTP API: one orchestrator's memory over HTTP behind per-orchestrator bearer tokens."""
