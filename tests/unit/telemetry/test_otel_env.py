"""Malformed ``OTEL_*`` values fail settings validation naming the variable; the
values of header and attribute lists (credentials) are never repeated."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchmem.config import ConfigError, load_settings

GOOD = {
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://tempo.example:443/v1/traces",
    "OTEL_SERVICE_NAME": "orchmem-prod",
    "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
    "OTEL_TRACES_SAMPLER_ARG": "0.25",
    "OTEL_PROPAGATORS": "tracecontext,baggage",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer abc,x-team=mem",
    "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod",
    "OTEL_BSP_MAX_QUEUE_SIZE": "4096",
    "OTEL_EXPORTER_OTLP_TIMEOUT": "10000",
    "OTEL_SDK_DISABLED": "False",
}

BAD = [
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:99999"),
    ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://"),
    ("OTEL_SERVICE_NAME", "  "),
    ("OTEL_TRACES_SAMPLER", "sometimes"),
    ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
    ("OTEL_TRACES_SAMPLER_ARG", "half"),
    ("OTEL_PROPAGATORS", "b3"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ("OTEL_EXPORTER_OTLP_HEADERS", "authorization: Bearer s3cr3t-token"),
    ("OTEL_RESOURCE_ATTRIBUTES", "=prod"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
    ("OTEL_BSP_SCHEDULE_DELAY", "soon"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "-5"),
    ("OTEL_SDK_DISABLED", "yes"),
]


def test_well_formed_variables_pass(tmp_path: Path) -> None:
    settings = load_settings(environ={**GOOD, "ORCHMEM_ROOT": str(tmp_path)})
    assert settings.telemetry.enabled is False


@pytest.mark.parametrize(("name", "value"), BAD, ids=[f"{n}={v}" for n, v in BAD])
def test_a_malformed_variable_is_named(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(environ={**GOOD, name: value, "ORCHMEM_ROOT": str(tmp_path)})
    message = str(raised.value)
    assert message.startswith(f"invalid settings: {name}: ")
    assert "s3cr3t" not in message


def test_the_telemetry_table_is_checked_and_reaches_child_processes(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"telemetry\.max_queue_size"):
        load_settings(environ={}, root=tmp_path, telemetry={"max_queue_size": 0})
    settings = load_settings(environ={"ORCHMEM_TELEMETRY__ENABLED": "true"}, root=tmp_path)
    assert settings.telemetry.enabled
    assert settings.env()["ORCHMEM_TELEMETRY__ENABLED"] == "true"
