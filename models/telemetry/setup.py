"""Turning telemetry on: the OpenTelemetry SDK, its OTLP/HTTP exporters and their queue.

:func:`configure` runs where a process builds its Celery app (the client, the API, the
workers). With ``telemetry.enabled`` false, the default, it returns at once and nothing
of the SDK is imported. Where spans go, the service name and the sampler are the standard
``OTEL_*`` variables, read by the SDK (checked by :mod:`orchmem.config.telemetry`).
Spans wait in a bounded queue and are exported from a background thread: a collector
that is down or slow costs a write or a recall nothing; once the queue is full new
spans are dropped, with a warning from the SDK.
"""

from __future__ import annotations

import atexit
import logging
import os
from typing import Any

from orchmem.config.telemetry import TelemetrySettings
from orchmem.models.telemetry import meters, spans

logger = logging.getLogger(__name__)

#: The instrumentation scope of every span and instrument.
SCOPE = "orchmem"
DEFAULT_SERVICE = "orchmem"

_providers: list[Any] = []


def configure(settings: TelemetrySettings) -> bool:
    """Record and export spans (and metrics) in this process when ``settings`` say so
    and the SDK is installed; a second call changes nothing. Returns whether it is on."""
    if _providers:
        return True
    if not settings.enabled or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    try:
        tracer_provider, meter_provider = _providers_for(settings)
    except ImportError:
        logger.warning("telemetry.enabled is set but the OpenTelemetry SDK is not "
                       "installed (pip install 'orchmem[otel]'): no traces are sent")
        return False
    except (ValueError, TypeError) as exc:  # the SDK refused a value: stay off, say why
        logger.warning("telemetry not started: %s", exc)
        return False
    _providers.extend(p for p in (tracer_provider, meter_provider) if p is not None)
    spans.install(tracer_provider.get_tracer(SCOPE))
    meters.install(meter_provider.get_meter(SCOPE) if meter_provider is not None else None)
    atexit.register(shutdown)
    return True


def _providers_for(settings: TelemetrySettings) -> tuple[Any, Any]:
    """The tracer provider (batched OTLP/HTTP export) and, when metrics are on, the
    meter provider (periodic OTLP/HTTP export)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    service = os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE
    resource = Resource.create({"service.name": service})
    tracer_provider = TracerProvider(resource=resource)
    timeout = settings.export_timeout_s
    tracer_provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(timeout=timeout), max_queue_size=settings.max_queue_size,
        max_export_batch_size=min(512, settings.max_queue_size),
        export_timeout_millis=timeout * 1000))
    if not settings.metrics:
        return tracer_provider, None
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(timeout=timeout),
        export_interval_millis=settings.metrics_interval_s * 1000,
        export_timeout_millis=timeout * 1000)
    return tracer_provider, MeterProvider(resource=resource, metric_readers=[reader])


def flush(timeout_s: float = 5.0) -> None:
    """Export what is queued now (at most ``timeout_s``): a process about to end."""
    for provider in _providers:
        provider.force_flush(int(timeout_s * 1000))


def shutdown() -> None:
    """Export what is queued and stop recording (at exit)."""
    spans.install(None)
    meters.install(None)
    while _providers:
        provider = _providers.pop()
        try:
            provider.shutdown()
        except Exception as exc:  # at exit: a collector that is gone is no error
            logger.warning("telemetry shutdown: %s", exc)
