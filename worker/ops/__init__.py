"""Running orchmem on one machine: ``orchmem up``, readiness files, the demo."""
