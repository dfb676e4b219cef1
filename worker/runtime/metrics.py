"""The worker's optional Prometheus endpoint (``worker.metrics_port``).

Tasks run in pool child processes, so metrics use prometheus-client's multiprocess
mode: children write to files under ``<root>/metrics/<worker>/``, and the worker's
main process serves them, together with the current depth of each shard queue, at
``http://<metrics_address>:<port>/metrics``:

- ``orchmem_tasks_total{task, outcome}`` (counter; outcome = Celery state),
- ``orchmem_task_seconds{task}`` (histogram),
- ``orchmem_queue_depth{queue}`` (gauge, read from Redis at each scrape),
- what the OpenTelemetry instruments of models/telemetry/meters.py record, named after
  them with dots as underscores (:class:`PrometheusSink`): context budget use,
  projection lag, schema migrations, reflection runs and re-embedded memories.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
from celery import signals

from orchmem.config import Settings
from orchmem.models.telemetry import meters
from orchmem.models.workspace.private import private_dir
from orchmem.worker.runtime.app import OrchmemCelery
from orchmem.worker.runtime.redis_clients import broker_client

logger = logging.getLogger(__name__)


class QueueDepthCollector:
    """Prometheus collector: the length of each shard queue, read at scrape time."""

    def __init__(self, broker_url: str, settings: Settings, queues: list[str]) -> None:
        self.client = broker_client(broker_url, settings, socket_timeout=2,
                                    socket_connect_timeout=2)
        self.queues = queues

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        gauge = GaugeMetricFamily("orchmem_queue_depth", "Messages waiting in a shard queue",
                                  labels=["queue"])
        for queue in self.queues:
            try:
                gauge.add_metric([queue], float(self.client.llen(queue)))
            except redis.RedisError as exc:
                logger.warning("queue depth of %s unavailable: %s", queue, exc)
        yield gauge


class PrometheusSink:
    """The recordings of models/telemetry/meters.py as Prometheus metrics, each made
    on its first recording (in the process that records it: a pool child's
    multiprocess files are its own), named after its instrument
    (``orchmem.schema.migrations`` → ``orchmem_schema_migrations_total``), with the
    recording's attributes as labels (``orchmem.outcome`` → ``outcome``)."""

    def __init__(self, registry: Any = None) -> None:
        self.registry = registry
        self.metrics: dict[str, Any] = {}

    def record(self, name: str, kind: meters.Instrument, value: float,
               attributes: dict[str, str]) -> None:
        keys = sorted(attributes)
        metric = self.metrics.get(name) or self._create(name, kind, keys)
        labelled = metric.labels(*(attributes[k] for k in keys)) if keys else metric
        if kind == "counter":
            labelled.inc(value)
        elif kind == "gauge":
            labelled.set(value)
        else:
            labelled.observe(value)

    def _create(self, name: str, kind: meters.Instrument, keys: list[str]) -> Any:
        from prometheus_client import REGISTRY, Counter, Gauge, Histogram

        described = meters.INSTRUMENTS[name][2]
        options: dict[str, Any] = {"registry": self.registry or REGISTRY}
        labels = [label_name(k) for k in keys]
        metric_name = name.replace(".", "_")
        if kind == "counter":
            made: Any = Counter(metric_name, described, labels, **options)
        elif kind == "gauge":
            made = Gauge(metric_name, described, labels, multiprocess_mode="mostrecent",
                         **options)
        else:
            options["buckets"] = meters.BUCKETS.get(name, Histogram.DEFAULT_BUCKETS)
            made = Histogram(metric_name, described, labels, **options)
        self.metrics[name] = made
        return made


def label_name(attribute: str) -> str:
    """A Prometheus label for an attribute: ``orchmem.context.purpose`` →
    ``context_purpose``."""
    return attribute.removeprefix("orchmem.").replace(".", "_")


def start_metrics(settings: Settings, app: OrchmemCelery, name: str, port: int,
                  queues: list[str]) -> Path:
    """Prepare the multiprocess folder, serve ``/metrics``, record tasks in children.

    Call in the worker's main process before it forks its pool. Returns the folder.
    """
    folder = settings.root / "metrics" / name
    shutil.rmtree(folder, ignore_errors=True)
    private_dir(folder)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    registry = CollectorRegistry()
    _settled_files_collector(multiprocess.MultiProcessCollector, folder)(registry)
    registry.register(QueueDepthCollector(app.conf.broker_url, settings, queues))
    start_http_server(port, addr=settings.worker.metrics_address, registry=registry)
    _connect_task_signals()
    meters.install_sink(PrometheusSink())
    logger.info("metrics on http://%s:%s/metrics", settings.worker.metrics_address, port)
    return folder


def serve_process_metrics(settings: Settings, port: int) -> None:
    """Serve ``/metrics`` for this one process (``orchmem serve --metrics-port``): what
    its recalls and context blocks record (models/telemetry/meters.py), from a registry
    of its own, at ``worker.metrics_address``."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    start_http_server(port, addr=settings.worker.metrics_address, registry=registry)
    meters.install_sink(PrometheusSink(registry))
    logger.info("metrics on http://%s:%s/metrics", settings.worker.metrics_address, port)


#: A metrics file holds at least its 8-byte header once its creator has initialised it.
_HEADER_BYTES = 8


def _settled_files_collector(base: Any, folder: Path) -> Any:
    """prometheus-client's multiprocess collector, minus the files a process is creating
    at this moment: such a file is empty for an instant, and reading it fails the whole
    scrape (a task's first metric, written while its answer already reached the caller)."""

    class SettledFilesCollector(base):
        def collect(self) -> Any:
            files = [str(f) for f in folder.glob("*.db")
                     if f.stat().st_size >= _HEADER_BYTES]
            return self.merge(files, accumulate=True)

    return SettledFilesCollector


def _connect_task_signals() -> None:
    started: dict[str, float] = {}
    instruments: dict[str, Any] = {}

    def metric(name: str) -> Any:
        # Created in the child on first use: the multiprocess files belong to its pid.
        if not instruments:
            from prometheus_client import Counter, Histogram

            instruments["total"] = Counter("orchmem_tasks", "Tasks run",
                                           ["task", "outcome"])
            instruments["seconds"] = Histogram("orchmem_task_seconds", "Task duration",
                                               ["task"])
        return instruments[name]

    def on_prerun(task_id: str | None = None, **_: Any) -> None:
        if task_id:
            started[task_id] = time.monotonic()

    def on_postrun(task_id: str | None = None, task: Any = None, state: str | None = None,
                   **_: Any) -> None:
        begun = started.pop(task_id or "", None)
        name = getattr(task, "name", "?")
        metric("total").labels(name, state or "UNKNOWN").inc()
        if begun is not None:
            metric("seconds").labels(name).observe(time.monotonic() - begun)

    signals.task_prerun.connect(on_prerun, weak=False, dispatch_uid="orchmem-metrics-pre")
    signals.task_postrun.connect(on_postrun, weak=False, dispatch_uid="orchmem-metrics-post")
