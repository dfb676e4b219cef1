"""One collector, one Redis and one worker exporting to it, per telemetry test module
(torn down, telemetry shut down with it, before any other module runs)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from orchmem_testing import RedisServer, WorkerProcess, free_port, make_settings
from otlp_receiver import OtlpReceiver, Traced

from orchmem.models.telemetry import setup

OTEL_ENV = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "1000"}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    receiver = OtlpReceiver().start()
    redis = RedisServer(tmp_path_factory.mktemp("otel-redis")).start()
    env = {**OTEL_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    saved = {name: os.environ.get(name) for name in [*env, "OTEL_SERVICE_NAME"]}
    os.environ.update({**env, "OTEL_SERVICE_NAME": "orchmem-client"})
    settings = make_settings(tmp_path_factory.mktemp("otel-root"), f"{redis.url}/0",
                             worker={"visibility_timeout_s": 5},
                             memory={"ingest": {"min_file_age_s": 0}},
                             telemetry={"enabled": True, "metrics_interval_s": 1})
    port = free_port()
    worker = WorkerProcess(settings, extra_env={**env, "OTEL_SERVICE_NAME": "orchmem-worker"},
                           extra_args=["--metrics-port", str(port)])
    try:
        worker.start()
        yield Traced(receiver, settings, worker, f"http://127.0.0.1:{port}/metrics", [])
    finally:
        worker.stop()
        setup.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        redis.stop()
        receiver.stop()
