"""The ``[telemetry]`` table and the check of the standard ``OTEL_*`` variables.

Traces and metrics go out over OTLP/HTTP when ``telemetry.enabled`` is true and the
``otel`` extra is installed (``pip install 'orchmem[otel]'``); where they go, the
service's name and the sampler are the standard ``OTEL_*`` variables, read by the
OpenTelemetry SDK itself (docs/operations/tracing.md#configuration). A malformed one
fails :func:`orchmem.config.load_settings` with the variable's name, whether telemetry
is on or not, so that a wrong value is found when it is set, not when tracing is turned
on. The values of header and attribute lists are never repeated in an error: they may
hold credentials.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from pydantic import Field

from orchmem.config.errors import ConfigError
from orchmem.config.memory_settings import Section


class TelemetrySettings(Section):
    """OpenTelemetry traces and metrics (off by default: then no SDK is loaded)."""

    enabled: bool = False
    #: Spans held for export at most; past it new spans are dropped (with one warning
    #: from the SDK), so an unreachable collector never holds up a write or a recall.
    max_queue_size: int = Field(2048, ge=16, le=1_000_000)
    #: How long one export to the collector may take before it is given up.
    export_timeout_s: float = Field(5.0, gt=0.0, le=300.0)
    #: How often metrics are sent to the collector.
    metrics_interval_s: float = Field(30.0, ge=1.0, le=3600.0)
    #: Export metrics as well as traces.
    metrics: bool = True
    #: Put the query's text on the recall span (``orchmem.recall.query``), for debugging;
    #: never for a restricted read (docs/operations/tracing.md#query-text).
    record_query_text: bool = False


SAMPLERS = frozenset({"always_on", "always_off", "traceidratio", "parentbased_always_on",
                      "parentbased_always_off", "parentbased_traceidratio"})
PROPAGATORS = frozenset({"tracecontext", "baggage", "none"})
PROTOCOLS = frozenset({"http/protobuf"})
BOOLEANS = frozenset({"true", "false"})
#: Variables whose value is a list of ``key=value`` pairs (never echoed: credentials).
PAIR_LISTS = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
              "OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_RESOURCE_ATTRIBUTES")
ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
             "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
#: Variables that hold a whole number of milliseconds or of items, at least 1.
COUNTS = ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
          "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "OTEL_BSP_SCHEDULE_DELAY",
          "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE",
          "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_METRIC_EXPORT_INTERVAL",
          "OTEL_METRIC_EXPORT_TIMEOUT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
          "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_SPAN_LINK_COUNT_LIMIT")


def check_otel_env(environ: Mapping[str, str]) -> None:
    """Raise ConfigError naming the first ``OTEL_*`` variable whose value is malformed."""
    checks: dict[str, Callable[[str], str | None]] = {
        **dict.fromkeys(ENDPOINTS, _endpoint), **dict.fromkeys(COUNTS, _count),
        **dict.fromkeys(PAIR_LISTS, _pairs),
        "OTEL_SERVICE_NAME": _service_name,
        "OTEL_TRACES_SAMPLER": lambda v: _one_of(v, SAMPLERS),
        "OTEL_TRACES_SAMPLER_ARG": _ratio,
        "OTEL_PROPAGATORS": _propagators,
        "OTEL_EXPORTER_OTLP_PROTOCOL": lambda v: _one_of(v, PROTOCOLS),
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": lambda v: _one_of(v, PROTOCOLS),
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": lambda v: _one_of(v, PROTOCOLS),
        "OTEL_SDK_DISABLED": lambda v: _one_of(v.lower(), BOOLEANS),
    }
    for name in sorted(checks):
        value = environ.get(name)
        if value is None:
            continue
        problem = checks[name](value)
        if problem is not None:
            raise ConfigError(f"invalid settings: {name}: {problem}")


def _endpoint(value: str) -> str | None:
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        return "not a URL (expected http://host:port or https://host:port)"
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        return "not a URL (expected http://host:port or https://host:port)"
    return None


def _count(value: str) -> str | None:
    text = value.strip()
    if not text.isdigit() or int(text) < 1:
        return f"{value[:40]!r} is not a whole number of at least 1"
    return None


def _pairs(value: str) -> str | None:
    for pair in filter(None, (p.strip() for p in value.split(","))):
        key, equals, _ = pair.partition("=")
        if not equals or not key.strip():
            return "expected comma-separated key=value pairs"
    return None


def _service_name(value: str) -> str | None:
    if not value.strip() or len(value) > 255 or not value.isprintable():
        return "a service name is 1 to 255 printable characters"
    return None


def _one_of(value: str, allowed: frozenset[str]) -> str | None:
    if value.strip() in allowed:
        return None
    return f"{value[:40]!r} is not one of {', '.join(sorted(allowed))}"


def _ratio(value: str) -> str | None:
    try:
        ratio = float(value)
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        return f"{value[:40]!r} is not a sampling ratio between 0 and 1"
    return None


def _propagators(value: str) -> str | None:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in PROPAGATORS]
    if not names or unknown:
        return f"expected a list of {', '.join(sorted(PROPAGATORS))}"
    return None
