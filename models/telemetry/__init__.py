"""OpenTelemetry traces and metrics behind a small facade that does nothing while
telemetry is off: spans (spans.py), the trace context in message headers (spans.py),
the SDK's set-up (setup.py), the metrics (meters.py) and the attribute names (names.py).
Nothing here imports the SDK until :func:`orchmem.models.telemetry.setup.configure`
turns telemetry on (docs/operations/tracing.md#off-means-free)."""
