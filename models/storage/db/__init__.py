"""Opening one orchestrator's files: pragmas, integrity, degraded mode, backups, counts."""
