"""Telemetry off, the default: nothing of the SDK is loaded by a write-back and a
recall, and the facade answers its shared no-op span."""

from __future__ import annotations

from pathlib import Path

from telemetry_probe import run_probe

from orchmem.config import load_settings
from orchmem.models.telemetry import spans
from orchmem.models.telemetry.setup import configure


def test_a_write_back_and_a_recall_import_nothing_of_opentelemetry_when_off(
        tmp_path: Path) -> None:
    outcome = run_probe(tmp_path, "off", {})
    assert outcome.returncode == 0, outcome.stderr[-3000:]
    assert "wrote ok, recalled 1" in outcome.stdout
    # redis-py loads the SDK by itself wherever it is installed; orchmem's own code
    # imports no opentelemetry module at all.
    assert "orchmem imported otel from: []" in outcome.stdout


def test_the_watch_sees_orchmem_import_the_sdk_when_on(tmp_path: Path) -> None:
    outcome = run_probe(tmp_path, "on", {"OTEL_SDK_DISABLED": "false",
                                         "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert outcome.returncode == 0, outcome.stderr[-3000:]
    assert "sdk loaded: True" in outcome.stdout
    assert "models/telemetry/setup.py" in outcome.stdout


def test_the_sdk_disabled_variable_keeps_telemetry_off(tmp_path: Path,
                                                       monkeypatch: object) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    settings = load_settings(environ={}, root=tmp_path, telemetry={"enabled": True})
    assert configure(settings.telemetry) is False
    assert not spans.enabled()


def test_the_facade_is_a_no_op_while_off() -> None:
    assert not spans.enabled()
    with spans.span("anything", {"orchmem.count": 1}, kind="server",
                    parent={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"},
                    links=[{"traceparent": "x"}]) as span:
        span.set("orchmem.count", 2)
        span.update({"orchmem.count": 3})
        span.rename("other")
    assert span is spans.NO_SPAN
    assert spans.headers() == {}
    assert spans.context_of({"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}) == {}

    def answer() -> int:
        return 42

    assert spans.carried(answer) is answer
