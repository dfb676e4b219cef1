"""The spans and metrics of orchmem's other work, against the collector of conftest.py
and its real worker: bulletin and context builds, an ingest scan and its files, a
reflection run, the execution log's append and checkpoints, migrations and
re-embedding; each metric both as OpenTelemetry and on the Prometheus endpoint; the
opt-in query text, never on a restricted read; and no exported attribute holds a
memory's, a file's or a query's text."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from otlp_receiver import OtlpReceiver, ReceivedSpan, Traced
from prometheus_client import CollectorRegistry, generate_latest

from orchmem.config import MemoryNotFound, Settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.schema.migrations import downgrade
from orchmem.models.storage.schema.tables import SCHEMA_VERSION
from orchmem.models.telemetry import meters, names, setup
from orchmem.models.writeback.apply import write_memories
from orchmem.tasks.maintenance import REEMBED
from orchmem.worker import MemoryClient
from orchmem.worker.runtime.metrics import PrometheusSink
from orchmem.worker.runtime.publish import publish

TIMEOUT = 120


@pytest.fixture
def prometheus() -> Iterator[CollectorRegistry]:
    """This process's recordings as Prometheus metrics, as a worker's endpoint serves
    them (the worker's own endpoint is ``traced.metrics_url``)."""
    registry = CollectorRegistry()
    meters.install_sink(PrometheusSink(registry))
    try:
        yield registry
    finally:
        meters.install_sink(None)


def _span(receiver: OtlpReceiver, name: str, orchestrator: str) -> ReceivedSpan:
    setup.flush()
    return receiver.wait_for(lambda: [
        s for s in receiver.named(name)
        if s.attributes.get(names.ORCHESTRATOR) == orchestrator])[0]


def _children(receiver: OtlpReceiver, parent: ReceivedSpan, name: str) -> list[ReceivedSpan]:
    return [s for s in receiver.in_trace(parent.trace_id)
            if s.name == name and s.parent_id == parent.span_id]


def _write(traced: Traced, client: MemoryClient, text: str, **fields: Any) -> str:
    traced.secrets.append(text)
    result = client.write_back(memories=[{"type": "Fact", "content": text, **fields}]
                               ).wait(TIMEOUT)
    assert result is not None and result["ok"], result
    return str(result["memoryIds"][0])


def _scraped(traced: Traced, wanted: str) -> str:
    def scrape() -> str | None:
        text = httpx.get(traced.metrics_url, timeout=10).text
        return text if wanted in text else None

    return str(traced.receiver.wait_for(scrape))


def test_bulletin_and_context_builds_are_spans_and_budget_use_is_on_both(
        traced: Traced, prometheus: CollectorRegistry) -> None:
    client = MemoryClient("otel-context", traced.settings)
    _write(traced, client, f"Release {uuid.uuid4().hex[:6]} ships after the security review")
    query = "when does the release ship"
    traced.secrets.append(query)
    context = client.context_for("step", query, max_tokens=400)
    assert context.bundle.nodes and context.bulletin.source == "live"
    receiver = traced.receiver
    built = _span(receiver, names.SPAN_CONTEXT, "otel-context")
    assert built.attributes[names.USED] == len(context.text)
    assert 0 < built.attributes[names.TOKENS_USED] <= built.attributes[names.TOKENS_BUDGET]
    assert built.attributes[names.HITS] == len(context.bundle.nodes)
    assert _children(receiver, built, names.SPAN_RECALL)
    bulletin = _span(receiver, names.SPAN_BULLETIN, "otel-context")
    assert bulletin.service == "orchmem-worker" and bulletin.attributes[names.COUNT] >= 1
    assert bulletin.trace_id == built.trace_id  # asked for by the context build
    receiver.wait_for(lambda: {names.M_CONTEXT_BUDGET, names.M_PROJECTION_LAG}
                      <= receiver.metric_names)
    exposed = generate_latest(prometheus).decode()
    assert ('orchmem_context_budget_use_count{context_budget_unit="tokens",'
            'context_purpose="step"} 1.0') in exposed
    assert 'orchmem_projection_lag{projection="vectors"} 0.0' in exposed
    assert 'orchmem_projection_lag{projection="episodes"}' in exposed


def test_an_ingest_scan_is_a_span_with_one_child_per_file(traced: Traced) -> None:
    client = MemoryClient("otel-ingest", traced.settings)
    folder = client.databases.workspace("otel-ingest").ingest_dir
    folder.mkdir(parents=True, exist_ok=True)
    note = f"The vendor contract {uuid.uuid4().hex[:6]} renews in May."
    traced.secrets.append(note)
    (folder / "notes.md").write_text(note + "\n", "utf-8")
    (folder / "image.bin").write_bytes(b"\x00\x01not text")
    done = client.ingest_now().wait(TIMEOUT)
    assert done is not None and done["ok"], done
    scan = _span(traced.receiver, names.SPAN_INGEST_SCAN, "otel-ingest")
    assert scan.service == "orchmem-worker"
    assert (scan.attributes[names.INGEST + "ingested"],
            scan.attributes[names.INGEST + "rejected"]) == (1, 1)
    files = {s.attributes[names.FILE]: s
             for s in _children(traced.receiver, scan, names.SPAN_INGEST_FILE)}
    assert set(files) == {"notes.md", "image.bin"}
    assert files["notes.md"].attributes[names.OUTCOME] == "ingested"
    assert files["notes.md"].attributes[names.COUNT] >= 1
    assert files["image.bin"].attributes[names.OUTCOME] == "rejected"
    assert files["image.bin"].attributes[names.REASON]


def test_a_reflection_run_is_a_span_with_its_outcome_counted_on_both(traced: Traced) -> None:
    client = MemoryClient("otel-reflect", traced.settings)
    for topic in ("billing", "billing tables", "deploys"):
        _write(traced, client, f"The {topic} owner is team {uuid.uuid4().hex[:6]}")
    result = client.reflect().wait(TIMEOUT)
    assert result is not None and result["ok"], result
    run = _span(traced.receiver, names.SPAN_REFLECT, "otel-reflect")
    assert run.attributes[names.OUTCOME] == "ok"
    assert run.attributes[names.REFLECTION + "units"] == result["units"]
    assert names.SECONDS + "topics" in run.attributes
    task = next(s for s in traced.receiver.in_trace(run.trace_id)
                if s.span_id == run.parent_id)
    assert task.name == "process orchmem.reflect"
    traced.receiver.wait_for(lambda: names.M_REFLECTIONS in traced.receiver.metric_names)
    assert 'orchmem_reflection_runs_total{outcome="ok"}' in _scraped(
        traced, "orchmem_reflection_runs_total")


def test_log_append_checkpoints_and_their_restore_are_spans(traced: Traced) -> None:
    client = MemoryClient("otel-log", traced.settings)
    with client.run("migrate") as run:
        with run.step("plan") as step:
            secret_prompt = f"Plan the migration of table {uuid.uuid4().hex[:6]}"
            traced.secrets.append(secret_prompt)
            step.prompt(secret_prompt)
        checkpoint = run.checkpoint("s3://state/plan.json", schema_version=1, step_id="plan")
    assert all(r and r["ok"] for r in run.wait(TIMEOUT))
    assert client.restore(checkpoint)["checkpointId"] == checkpoint
    setup.flush()
    receiver = traced.receiver
    appends = receiver.wait_for(lambda: [
        s for s in receiver.named(names.SPAN_LOG_APPEND)
        if s.attributes.get(names.ORCHESTRATOR) == "otel-log"
        and s.attributes.get(names.CHECKPOINTS)])
    assert appends[0].service == "orchmem-worker"
    assert appends[0].attributes[names.APPENDED] >= 1
    created = _span(receiver, names.SPAN_CHECKPOINT_CREATE, "otel-log")
    assert (created.attributes[names.CHECKPOINT_ID], created.attributes[names.RUN_ID],
            created.attributes[names.SCHEMA_VERSION]) == (checkpoint, run.run_id, 1)
    assert created.trace_id == appends[0].trace_id  # the worker's append continues it
    assert len(_children(receiver, created, "publish orchmem.log")) == 1
    restored = _span(receiver, names.SPAN_CHECKPOINT_RESTORE, "otel-log")
    assert (restored.attributes[names.CHECKPOINT_ID], restored.attributes[names.OUTCOME]) \
        == (checkpoint, "ok")
    missing = checkpoint[:-4] + "0000" if not checkpoint.endswith("0000") else \
        checkpoint[:-4] + "1111"
    with pytest.raises(MemoryNotFound):
        client.restore(missing)
    setup.flush()
    refused = receiver.wait_for(lambda: [
        s for s in receiver.named(names.SPAN_CHECKPOINT_RESTORE)
        if s.attributes.get(names.ORCHESTRATOR) == "otel-log"
        and s.attributes.get(names.OUTCOME) != "ok"])[0]
    assert names.CHECKPOINT_ID not in refused.attributes


def test_migrations_and_reembedding_are_counted_on_both(
        traced: Traced, prometheus: CollectorRegistry) -> None:
    settings: Settings = traced.settings
    made = Databases(settings)
    odb = made.open("otel-migrate")
    assert odb is not None
    downgrade(odb, SCHEMA_VERSION - 1, force=True)
    made.close_all()
    again = Databases(settings)
    assert again.open("otel-migrate") is not None  # a writer's open migrates it
    again.close_all()
    exposed = generate_latest(prometheus).decode()
    assert 'orchmem_schema_migrations_total{outcome="started"} 1.0' in exposed
    assert 'orchmem_schema_migrations_total{outcome="completed"} 1.0' in exposed

    databases = Databases(settings)
    target = databases.open("otel-reembed")
    assert target is not None
    texts = [f"fact {i} about gardening {uuid.uuid4().hex[:6]}" for i in range(3)]
    traced.secrets.extend(texts)
    write_memories(target, key="no-vectors", task="t", memories=[validate(MemoryInput, {
        "type": "Fact", "content": text,
        "source": {"sourceType": "manual", "capturedBy": "user"}}) for text in texts])
    databases.close_all()
    client = MemoryClient("otel-reembed", settings)
    _, handle = publish(client.app, REEMBED, "otel-reembed", "reembed",
                        {"idempotencyKey": "otel-reembed"})
    assert handle.get(timeout=TIMEOUT)["embedded"] == 3
    assert 'orchmem_reembed_memories_total{outcome="embedded"} 3.0' in _scraped(
        traced, "orchmem_reembed_memories_total")
    setup.flush()
    traced.receiver.wait_for(lambda: {names.M_MIGRATIONS, names.M_REEMBEDDED}
                             <= traced.receiver.metric_names)


def _recall_span(traced: Traced, orchestrator: str, query: str) -> ReceivedSpan:
    setup.flush()
    return traced.receiver.wait_for(lambda: [
        s for s in traced.receiver.named(names.SPAN_RECALL)
        if s.attributes.get(names.ORCHESTRATOR) == orchestrator
        and s.attributes.get(names.QUERY_CHARS) == len(query)])[0]


def test_the_query_text_is_recorded_only_when_asked_and_never_for_a_restricted_read(
        traced: Traced) -> None:
    plain = MemoryClient("otel-query", traced.settings)
    _write(traced, plain, "The staging cluster is rebuilt every Monday")
    _write(traced, plain, "The staging root password is Heron-5521",
           sensitivity="restricted")
    _write(traced, plain, "The staging budget is confidential: 40k a quarter",
           sensitivity="confidential")
    off = "how often is staging rebuilt"
    traced.secrets.append(off)
    assert plain.recall(off, top_n=1).nodes
    assert names.QUERY_TEXT not in _recall_span(traced, "otel-query", off).attributes

    telemetry = traced.settings.telemetry.model_copy(update={"record_query_text": True})
    asking = MemoryClient("otel-query", traced.settings.model_copy(
        update={"telemetry": telemetry}))
    on = "how often is the cluster rebuilt"
    bundle = asking.recall(on, top_n=1)
    assert [n.memory.sensitivity.value for n in bundle.nodes] == ["internal"]
    assert _recall_span(traced, "otel-query", on).attributes[names.QUERY_TEXT] == on

    restricted = "what is the staging root password"
    confidential = "staging budget per quarter"
    traced.secrets += [restricted, confidential]
    assert asking.recall(restricted, top_n=1, include_restricted=True,
                         purpose="incident review").nodes
    assert names.QUERY_TEXT not in _recall_span(traced, "otel-query", restricted).attributes
    found = asking.recall(confidential, top_n=5)
    assert any(n.memory.sensitivity.value == "confidential" for n in found.nodes)
    assert names.QUERY_TEXT not in _recall_span(traced, "otel-query", confidential).attributes
    holds_a_key = "was key AKIAIOSFODNN7EXAMPLE rotated on the cluster"
    traced.secrets.append("AKIAIOSFODNN7EXAMPLE")
    keyed = asking.recall(holds_a_key, top_n=1)
    assert [n.memory.sensitivity.value for n in keyed.nodes] == ["internal"]  # the key alone
    assert names.QUERY_TEXT not in _recall_span(traced, "otel-query", holds_a_key).attributes

def test_no_attribute_of_these_spans_holds_a_memory_a_file_or_a_query(
        traced: Traced) -> None:
    setup.flush()
    receiver = traced.receiver
    exported = {s.name for s in receiver.spans}
    assert {names.SPAN_BULLETIN, names.SPAN_CONTEXT, names.SPAN_INGEST_SCAN,
            names.SPAN_INGEST_FILE, names.SPAN_REFLECT, names.SPAN_LOG_APPEND,
            names.SPAN_CHECKPOINT_CREATE, names.SPAN_CHECKPOINT_RESTORE} <= exported
    leaked = [(span.name, value) for span in receiver.spans for value in span.texts
              for secret in traced.secrets if secret in value or secret.lower() in value]
    assert leaked == []
