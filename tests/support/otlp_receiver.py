"""A real OTLP/HTTP collector for tests: an HTTP server on a free port that decodes
what the OpenTelemetry exporters send (``/v1/traces``, ``/v1/metrics``) with
opentelemetry-proto, and keeps every span and metric name it received."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from orchmem_testing import free_port

if TYPE_CHECKING:
    from orchmem_testing import WorkerProcess

    from orchmem.config import Settings


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    service: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]]
    #: Every attribute value of the span, its events, links and resource, as text.
    texts: list[str]


@dataclass
class OtlpReceiver:
    port: int = field(default_factory=free_port)
    spans: list[ReceivedSpan] = field(default_factory=list)
    metric_names: set[str] = field(default_factory=set)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                answer = receiver.receive(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def receive(self, path: str, body: bytes) -> bytes:
        with self._lock:
            self.requests += 1
            if path.endswith("/v1/traces"):
                request = ExportTraceServiceRequest.FromString(body)
                self.spans.extend(_spans(request))
                return ExportTraceServiceResponse().SerializeToString()
            metrics = ExportMetricsServiceRequest.FromString(body)
            for resource in metrics.resource_metrics:
                for scope in resource.scope_metrics:
                    self.metric_names.update(m.name for m in scope.metrics)
            return ExportMetricsServiceResponse().SerializeToString()

    def named(self, name: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def in_trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def wait_for(self, found: Callable[[], Any], timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = found()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"not received in {timeout}s; spans: "
                             f"{sorted({s.name for s in self.spans})}")


@dataclass
class Traced:
    """A collector, settings with telemetry on, and a real worker exporting to it."""

    receiver: OtlpReceiver
    settings: Settings
    worker: WorkerProcess
    #: The worker's Prometheus endpoint (``.../metrics``).
    metrics_url: str
    #: Texts written or asked by the tests: no exported attribute may hold one.
    secrets: list[str]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _texts(pairs: Any) -> list[str]:
    return [f"{kv.key}={_value(kv.value)!s}" for kv in pairs]


def _spans(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    found = []
    for resource in request.resource_spans:
        resource_attributes = {kv.key: _value(kv.value) for kv in resource.resource.attributes}
        for scope in resource.scope_spans:
            for span in scope.spans:
                texts = [*_texts(span.attributes), *_texts(resource.resource.attributes),
                         *(t for e in span.events for t in [e.name, *_texts(e.attributes)]),
                         *(t for link in span.links for t in _texts(link.attributes)),
                         span.name, span.status.message]
                found.append(ReceivedSpan(
                    span.name, span.trace_id.hex(), span.span_id.hex(),
                    span.parent_span_id.hex(), span.kind,
                    str(resource_attributes.get("service.name", "")),
                    {kv.key: _value(kv.value) for kv in span.attributes},
                    [(link.trace_id.hex(), link.span_id.hex()) for link in span.links], texts))
    return found
