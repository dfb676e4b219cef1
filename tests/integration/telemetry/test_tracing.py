"""Traces end to end, against real parts: a collector receiving OTLP/HTTP on a free port
(tests/support/otlp_receiver.py), a real Redis, a real worker process and the real model.

One write-back is one trace from the client's publish span to the worker's task span
and its SQLite transaction; a recall is one span with a child for each step; an HTTP
request that carries ``traceparent`` continues that trace; and no exported attribute
holds a memory's text or a query's."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from api_testing import ApiServer, start_api
from otlp_receiver import OtlpReceiver, ReceivedSpan, Traced

from orchmem.models.telemetry import setup
from orchmem.worker import MemoryClient

#: SpanKind values of the OTLP protobuf.
SERVER, PRODUCER, CONSUMER = 2, 4, 5


def _child(spans: list[ReceivedSpan], parent: ReceivedSpan, name: str) -> ReceivedSpan:
    found = [s for s in spans if s.name == name and s.parent_id == parent.span_id]
    assert found, f"no {name} under {parent.name}: {[(s.name, s.parent_id) for s in spans]}"
    return found[0]


def _write(traced: Traced, client: MemoryClient) -> tuple[str, str]:
    text = f"The deploy window of project {uuid.uuid4().hex[:8]} is Thursday at noon"
    traced.secrets.append(text)
    handle = client.write_back(memories=[{"type": "Fact", "content": text}])
    result = handle.wait(60)
    assert result is not None and result["ok"], result
    assert handle.task_id is not None
    return text, handle.task_id


def test_a_write_back_is_one_trace_from_the_client_to_the_worker_commit(
        traced: Traced) -> None:
    client = MemoryClient("otel-writer", traced.settings)
    _, task_id = _write(traced, client)
    setup.flush()
    receiver = traced.receiver
    task = receiver.wait_for(lambda: [
        s for s in receiver.named("process orchmem.writeback")
        if s.attributes.get("messaging.message.id") == task_id])[0]
    published = [s for s in receiver.named("publish orchmem.writeback")
                 if s.attributes.get("messaging.message.id") == task_id]
    assert len(published) == 1
    client_span = published[0]
    assert (client_span.kind, client_span.service) == (PRODUCER, "orchmem-client")
    assert (task.kind, task.service) == (CONSUMER, "orchmem-worker")
    assert task.trace_id == client_span.trace_id
    assert task.parent_id == client_span.span_id
    assert task.attributes["orchmem.outcome"] == "ok"
    assert task.attributes["messaging.system"] == "redis"
    _child(receiver.in_trace(task.trace_id), client_span, "orchmem.outbox.record")
    # Its commit: under the task span, or, when a batch applied it, the batch's
    # transaction, which the task span links to (it ran inside it) and whose batch span
    # links back to the task's trace.
    commit = receiver.wait_for(lambda: _commit_of(receiver, task))
    assert commit.name == "sqlite transaction"
    assert commit.attributes["db.system.name"] == "sqlite"


def _commit_of(receiver: OtlpReceiver, task: ReceivedSpan) -> ReceivedSpan | None:
    spans = list(receiver.spans)
    for span in spans:
        if span.name != "sqlite transaction":
            continue
        if span.trace_id == task.trace_id and _descends(spans, span, task):
            return span
        batch = next((s for s in spans if s.span_id == span.parent_id), None)
        if batch is not None and (span.trace_id, span.span_id) in task.links \
                and (task.trace_id, task.parent_id) in batch.links:
            assert batch.name == "process orchmem.writeback batch"
            assert batch.attributes["messaging.batch.message_count"] >= 1
            return span
    return None


def _descends(spans: list[ReceivedSpan], span: ReceivedSpan, ancestor: ReceivedSpan) -> bool:
    by_id = {s.span_id: s for s in spans}
    current: ReceivedSpan | None = span
    while current is not None:
        if current.parent_id == ancestor.span_id:
            return True
        current = by_id.get(current.parent_id)
    return False


def test_a_recall_is_one_span_with_a_child_for_each_step(traced: Traced) -> None:
    client = MemoryClient("otel-reader", traced.settings)
    _write(traced, client)
    query = "when is the deploy window"
    traced.secrets.append(query)
    bundle = client.recall(query, route=True)
    assert bundle.nodes
    setup.flush()
    receiver = traced.receiver
    recall = receiver.wait_for(lambda: [
        s for s in receiver.named("orchmem.recall")
        if s.attributes.get("orchmem.orchestrator_id") == "otel-reader"])[0]
    spans = receiver.in_trace(recall.trace_id)
    for step in ("orchmem.recall.embed", "orchmem.recall.full_text",
                 "orchmem.recall.vector_search", "orchmem.recall.fusion",
                 "orchmem.recall.bundle"):
        _child(spans, recall, step)
    assert recall.attributes["orchmem.recall.hits"] == len(bundle.nodes)
    assert recall.attributes["orchmem.query.chars"] == len(query)
    assert "orchmem.recall.plan.intent" in recall.attributes


def test_an_http_request_with_traceparent_continues_the_callers_trace(
        traced: Traced) -> None:
    api: ApiServer = start_api(traced.settings, ["otel-http"])
    trace_id, parent_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    text = f"The on-call phone of team {uuid.uuid4().hex[:8]} is in the blue drawer"
    traced.secrets.append(text)
    try:
        headers = {**api.auth("otel-http"), "traceparent": f"00-{trace_id}-{parent_id}-01"}
        answer = httpx.post(f"{api.url}/v1/orchestrators/otel-http/writeback",
                            json={"memories": [{"type": "Fact", "content": text}]},
                            headers=headers, timeout=60)
        assert answer.status_code in (200, 202), answer.text
        recalled = httpx.get(f"{api.url}/v1/orchestrators/otel-http/recall",
                             params={"q": "where is the on-call phone"}, headers=headers,
                             timeout=60)
        assert recalled.status_code == 200, recalled.text
        traced.secrets.append("where is the on-call phone")
    finally:
        api.stop()
    setup.flush()
    receiver = traced.receiver
    receiver.wait_for(lambda: any(s.name == "process orchmem.writeback"
                                  for s in receiver.in_trace(trace_id)))
    spans = receiver.in_trace(trace_id)
    servers = [s for s in spans if s.kind == SERVER and s.parent_id == parent_id]
    assert {s.name for s in servers} == {
        "POST /v1/orchestrators/{orchestratorId}/writeback",
        "GET /v1/orchestrators/{orchestratorId}/recall"}
    post = next(s for s in servers if s.name.startswith("POST"))
    assert post.attributes["http.response.status_code"] == answer.status_code
    publish = _child(spans, post, "publish orchmem.writeback")
    _child(spans, publish, "process orchmem.writeback")
    get = next(s for s in servers if s.name.startswith("GET"))
    _child(spans, get, "orchmem.recall")


def test_a_collector_that_is_down_fails_no_write_and_no_recall(tmp_path: Path) -> None:
    # Its own process: telemetry is configured once per process, here towards a port
    # where nothing listens, with a queue so small that spans must be dropped.
    from telemetry_probe import run_with_dead_collector

    outcome = run_with_dead_collector(tmp_path)
    assert outcome.returncode == 0, outcome.stderr[-3000:]
    assert "wrote ok, recalled 1" in outcome.stdout
    assert "Queue full, dropping Span" in outcome.stderr  # the SDK's warning


async def _mcp_calls(url: str, headers: dict[str, str], text: str) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        remembered = await client.call_tool("remember", {"content": text})
        assert not remembered.is_error, remembered.content
        recalled = await client.call_tool("recall", {"query": "which editor?"})
        assert not recalled.is_error, recalled.content


def test_an_mcp_tool_call_with_traceparent_continues_the_callers_trace(
        traced: Traced) -> None:
    import threading

    import anyio
    import uvicorn
    from orchmem_testing import free_port

    from orchmem.models.workspace.folders import Workspace
    from orchmem.worker.api.tokens import TokenStore
    from orchmem.worker.mcp.http import mcp_http_app

    store = TokenStore(traced.settings)
    Workspace.for_orchestrator(traced.settings, "otel-mcp").ensure()
    token, _ = store.create("otel-mcp")
    app, _ = mcp_http_app(traced.settings, "otel-mcp", store=store)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(),
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    trace_id, parent_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    text = f"The favourite editor of user {uuid.uuid4().hex[:8]} is Helix"
    traced.secrets.append(text)
    try:
        while not server.started:
            anyio.run(anyio.sleep, 0.02)
        anyio.run(_mcp_calls, f"http://127.0.0.1:{server.config.port}/mcp",
                  {"Authorization": f"Bearer {token}",
                   "traceparent": f"00-{trace_id}-{parent_id}-01"}, text)
    finally:
        server.should_exit = True
        thread.join(15)
    setup.flush()
    receiver = traced.receiver
    receiver.wait_for(lambda: any(s.name == "process orchmem.writeback"
                                  for s in receiver.in_trace(trace_id)))
    spans = receiver.in_trace(trace_id)
    calls = {s.name: s for s in spans if s.name.startswith("tools/call ")}
    assert set(calls) == {"tools/call remember", "tools/call recall"}
    assert {(s.kind, s.parent_id) for s in calls.values()} == {(SERVER, parent_id)}
    publish = _child(spans, calls["tools/call remember"], "publish orchmem.writeback")
    _child(spans, publish, "process orchmem.writeback")
    _child(spans, calls["tools/call recall"], "orchmem.recall")


def test_no_exported_attribute_holds_a_memory_or_a_query(traced: Traced) -> None:
    client = MemoryClient("otel-private", traced.settings)
    text, _ = _write(traced, client)
    client.recall(text)
    setup.flush()
    receiver = traced.receiver
    receiver.wait_for(lambda: any(s.attributes.get("orchmem.orchestrator_id") == "otel-private"
                                  and s.name == "process orchmem.writeback"
                                  for s in receiver.spans))
    assert len(traced.secrets) >= 4  # the texts of every test of this module
    leaked = [(span.name, value) for span in receiver.spans for value in span.texts
              for secret in traced.secrets if secret in value or secret.lower() in value]
    assert leaked == []
    receiver.wait_for(lambda: {"orchmem.recall.duration", "orchmem.task.outcomes"}
                      <= receiver.metric_names)
