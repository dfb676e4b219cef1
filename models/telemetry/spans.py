"""Spans and the trace context, as a facade that costs one check while telemetry is off.

:func:`span` answers a shared :class:`Span` that does nothing until
:func:`orchmem.models.telemetry.setup.configure` installs a tracer; then a live span
of the OpenTelemetry SDK, made the current one for its block. The trace context
crosses the queue as W3C ``traceparent``/``tracestate`` message headers
(:func:`headers`, read back as a span's ``parent``), and crosses to a helper thread
with :func:`carried`. Nothing of OpenTelemetry is imported while telemetry is off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar

AttributeValue = str | bool | int | float
Attributes = Mapping[str, AttributeValue]
#: Where a trace context is read from: message headers, HTTP headers (lower case).
Carrier = Mapping[str, Any]
Kind = Literal["internal", "server", "client", "producer", "consumer"]
#: The headers that carry the trace context (W3C Trace Context).
CONTEXT_HEADERS = ("traceparent", "tracestate")

T = TypeVar("T")

_tracer: Any = None


def enabled() -> bool:
    """Whether spans are recorded (telemetry configured on in this process)."""
    return _tracer is not None


def install(tracer: Any) -> None:
    """Record spans with ``tracer`` from now on (None: stop recording)."""
    global _tracer
    _tracer = tracer


class Span:
    """A span that records nothing: what :func:`span` answers while telemetry is off."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, name: str, value: AttributeValue) -> None:
        """Set one attribute (an id, a count, a length, an outcome: never content)."""
        return None

    def update(self, attributes: Attributes) -> None:
        """Set several attributes."""
        return None

    def rename(self, name: str) -> None:
        """Name the span once it is known better (an HTTP route, after routing)."""
        return None


NO_SPAN = Span()


class _LiveSpan(Span):
    """An SDK span, current for its block; an exception that leaves it marks it failed."""

    __slots__ = ("_manager", "_span")

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self._span: Any = None

    def __enter__(self) -> Span:
        self._span = self._manager.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._manager.__exit__(*exc)

    def set(self, name: str, value: AttributeValue) -> None:
        self._span.set_attribute(name, value)

    def update(self, attributes: Attributes) -> None:
        self._span.set_attributes(dict(attributes))

    def rename(self, name: str) -> None:
        self._span.update_name(name)


def span(name: str, attributes: Attributes | None = None, *, kind: Kind = "internal",
         parent: Carrier | None = None, links: Iterable[Carrier] = ()) -> Span:
    """A span named ``name`` for a ``with`` block: a child of the current span, or of
    the context ``parent`` carries (headers of a message or a request) when it carries
    one (then linked to the span current here, if any: a task's span to its batch's);
    ``links``: carriers of other traces it relates to (a batch's tasks)."""
    tracer = _tracer
    if tracer is None:
        return NO_SPAN
    from opentelemetry import trace

    context = _extract(parent) if parent is not None and _carries(parent) else None
    linked = [trace.Link(c) for c in (_span_context(carrier) for carrier in links)
              if c is not None]
    enclosing = trace.get_current_span().get_span_context()
    if context is not None and enclosing.is_valid:
        # Continued from a message but run inside another span (a task inside its
        # batch's transaction): linked to that span.
        linked.append(trace.Link(enclosing))
    return _LiveSpan(tracer.start_as_current_span(
        name, context=context, kind=getattr(trace.SpanKind, kind.upper()),
        attributes=dict(attributes or {}), links=linked))


def record(name: str, attributes: Attributes, start_ns: int, end_ns: int) -> None:
    """A span that already happened, from ``start_ns`` to ``end_ns`` (``time.time_ns()``
    values), as a child of the current span: one step of work done in batches (an
    ingested file, whose commit is its scan's)."""
    tracer = _tracer
    if tracer is None:
        return
    done = tracer.start_span(name, attributes=dict(attributes), start_time=start_ns)
    done.end(end_time=max(start_ns, end_ns))


def headers() -> dict[str, str]:
    """The current trace context as headers to send with a message ({} when off)."""
    if _tracer is None:
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def context_of(carrier: Any) -> dict[str, str]:
    """The trace context headers found in ``carrier``: anything with ``get(name)`` (a
    Celery request, HTTP headers, a dict); {} while telemetry is off."""
    if carrier is None or _tracer is None:
        return {}
    found = {name: carrier.get(name) for name in CONTEXT_HEADERS}
    return {name: value for name, value in found.items() if isinstance(value, str)}


def carried(function: Callable[[], T]) -> Callable[[], T]:
    """``function`` to run on another thread under this thread's current span."""
    if _tracer is None:
        return function
    from opentelemetry import context

    current = context.get_current()

    def run() -> T:
        token = context.attach(current)
        try:
            return function()
        finally:
            context.detach(token)

    return run


def _carries(carrier: Carrier) -> bool:
    return isinstance(carrier.get("traceparent"), str)


def _extract(carrier: Carrier) -> Any:
    from opentelemetry import propagate

    return propagate.extract(context_of(carrier))


def _span_context(carrier: Carrier) -> Any:
    """The span context ``carrier`` names, or None when it names none (valid)."""
    if not _carries(carrier):
        return None
    from opentelemetry import trace

    found = trace.get_current_span(_extract(carrier)).get_span_context()
    return found if found.is_valid else None
