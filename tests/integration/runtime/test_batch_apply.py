"""A batch of write-backs applied together (``tasks.batch.apply_batch``, what a batching
shard worker runs in its pool child), in this process against real SQLite and the real
model: one embedding call and one commit for the batch, and each task's outcome exactly
as when it runs alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import distinct_texts, make_settings, unique_id

from orchmem.config import MemoryValidationError
from orchmem.models.core.payloads import key_of
from orchmem.models.core.shapes import derive_id
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.execlog.rules import new_run_id
from orchmem.models.storage.delivery import receipts
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.batch import FAILURE, SUCCESS, Waiting, apply_batch, run_one
from orchmem.tasks.publish import envelope
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_immediate_app

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def waiting(orch: str, payload: dict[str, Any]) -> Waiting:
    env = envelope(orch, WRITEBACK, "wb", payload)
    return Waiting(id=env.task_id, kwargs=env.kwargs, request={"delivery_info": {}})


def facts(orch: str, texts: list[str]) -> list[Waiting]:
    return [waiting(orch, {"memories": [{"type": "Fact", "content": t, "source": MANUAL}],
                           "idempotencyKey": f"k-{i}"}) for i, t in enumerate(texts)]


def model_calls(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The texts of each call of the real model from now on (the test's monkeypatch)."""
    calls: list[list[str]] = []
    encode = embedder.encode

    def recorded(batch: Any) -> Any:
        calls.append(list(batch))
        return encode(batch)

    monkeypatch.setattr(embedder, "encode", recorded)
    return calls


@pytest.fixture
def app(tmp_path: Path, embedder: Embedder) -> Any:
    return create_immediate_app(make_settings(tmp_path / "root", "redis://127.0.0.1:1/0"))


def test_a_batch_embeds_once_commits_once_and_each_task_gets_its_own_result(
        app: Any, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    task = app.tasks[WRITEBACK]
    orch = unique_id("batch")
    texts = distinct_texts(12, seed=41)
    items = facts(orch, texts)
    # One invalid task in the middle: it fails alone, the others are written.
    items.insert(5, waiting(orch, {"memories": [{"type": "Fact", "content": "",
                                                 "source": MANUAL}],
                                   "idempotencyKey": "k-bad"}))
    calls = model_calls(embedder, monkeypatch)
    outcomes = apply_batch(task, items)
    assert [o.state for o in outcomes] == [SUCCESS] * 5 + [FAILURE] + [SUCCESS] * 7
    assert isinstance(outcomes[5].value, MemoryValidationError)
    assert [len(c) for c in calls] == [12], "one model call for every text of the batch"
    odb = app.databases.open(orch)
    assert receipts.status(odb, "k-bad") == receipts.REJECTED
    for outcome in outcomes[:5] + outcomes[6:]:
        assert outcome.value["ok"] and len(outcome.value["created"]) == 1
        assert receipts.status(odb, outcome.value["idempotencyKey"]) == receipts.DONE
    with odb.read():
        rows = odb.sql("SELECT content FROM memories ORDER BY id")
        deliveries = odb.sql("SELECT DISTINCT deliveries FROM task_receipts")
    assert [r[0] for r in rows] == texts, "publish order"
    assert deliveries == [(1,)], "each delivery counted once"
    logged = [r for r in read_log(odb.workspace.log_path) if r["event"] == "batch"]
    assert [r["size"] for r in logged] == [13], "one batch, the invalid task in it"


def test_a_job_across_orchestrators_embeds_in_one_model_call_after_counting_each(
        app: Any, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Orchestrators interleaved (three write-backs of A, a transcript of B, one of C):
    every delivery is counted, then one model call for all five texts (B's as the
    extractor will word it); D's delivery came
    back unfinished (its receipt exists: it may be what crashed the model), so its
    text is embedded on its own."""
    task = app.tasks[WRITEBACK]
    a, b, c, d = (unique_id(name) for name in ("a", "b", "c", "d"))
    texts = distinct_texts(6, seed=47)
    of_a = facts(a, texts[:3])
    transcript = waiting(b, {"channelTranscript": {"conversationId": "c-1", "messages": [
        {"role": "user", "text": f"I prefer {texts[3]}."}, {"role": "assistant", "text": "Ok"}]}})
    items = [of_a[0], transcript, of_a[1], facts(c, [texts[4]])[0], of_a[2],
             facts(d, [texts[5]])[0]]
    crashed = app.databases.open(d)
    receipts.begin_batch(crashed, [(key_of(d, task.kind, items[5].kwargs["payload"]),
                                    WRITEBACK)])
    calls = model_calls(embedder, monkeypatch)
    outcomes = apply_batch(task, items)
    assert [o.state for o in outcomes] == [SUCCESS] * 6
    extracted = outcomes[1].value["created"]
    assert len(extracted) == 1, "the transcript's text, extracted ahead, is in the call"
    odb_b = app.databases.open(b)
    with odb_b.read():
        said = odb_b.sql("SELECT content FROM memories")[0][0]
    assert [sorted(call) for call in calls] == [sorted([*texts[:3], said, texts[4]]),
                                                [texts[5]]]
    for orch, expected in ((a, texts[:3]), (b, [said]), (c, texts[4:5]), (d, texts[5:])):
        odb = app.databases.open(orch)
        with odb.read():
            assert [r[0] for r in odb.sql("SELECT content FROM memories ORDER BY id")] == \
                expected
            deliveries = odb.sql("SELECT deliveries FROM task_receipts")
        assert deliveries == [(2,)] if orch == d else [(1,)] * len(expected)


def test_a_batch_gives_the_same_results_as_one_by_one_and_a_replay_writes_nothing(
        app: Any) -> None:
    task = app.tasks[WRITEBACK]
    texts = distinct_texts(8, seed=43)
    # The same statement twice: the second reinforces the first, in both ways.
    texts[6] = texts[2]
    batched, alone = unique_id("batched"), unique_id("alone")
    together = apply_batch(task, facts(batched, texts))
    one_by_one = [run_one(task, item) for item in facts(alone, texts)]
    shape = [{k: (len(v) if isinstance(v, list) else v) for k, v in o.value.items()
              if k not in ("orchestratorId", "memoryIds", "created", "reinforced",
                           "unchanged")} | {"created": len(o.value["created"]),
                                            "reinforced": len(o.value["reinforced"])}
             for o in together]
    assert shape == [{k: (len(v) if isinstance(v, list) else v) for k, v in o.value.items()
                      if k not in ("orchestratorId", "memoryIds", "created", "reinforced",
                                   "unchanged")} | {"created": len(o.value["created"]),
                                                    "reinforced": len(o.value["reinforced"])}
                     for o in one_by_one]
    assert together[6].value["reinforced"] == together[2].value["created"]
    again = apply_batch(task, facts(batched, texts))
    assert all(o.value["duplicate"] for o in again)
    assert [o.value["memoryIds"] for o in again] == [o.value["memoryIds"] for o in together]
    odb = app.databases.open(batched)
    with odb.read():
        assert odb.sql("SELECT count(*) FROM memories") == [(7,)]


def test_in_a_batch_each_steps_log_events_commit_or_roll_back_with_its_memories(
        app: Any) -> None:
    task = app.tasks[WRITEBACK]
    orch = unique_id("batch-log")
    run_id = new_run_id(orch)
    unknown = derive_id("m", orch, "never-written", 0)

    def step(n: int, edges: list[dict[str, Any]] | None = None) -> Waiting:
        return waiting(orch, {
            "memories": [{"type": "Fact", "key": "x", "content": f"Step {n} chose plan {n}",
                          "source": MANUAL}],
            "edges": edges or [],
            "logEvents": [{"runId": run_id, "kind": "prompt", "stepId": f"s{n}",
                           "text": f"Choose a plan for step {n}",
                           "idempotencyKey": f"{run_id}/{n}"}],
            "idempotencyKey": f"step-{n}"})

    items = [step(0), step(1, [{"fromMemoryId": "x", "toMemoryId": unknown,
                                "edgeType": "RelatedTo"}]), step(2)]
    outcomes = apply_batch(task, items)
    assert [o.state for o in outcomes] == [SUCCESS, FAILURE, SUCCESS]
    assert [outcomes[i].value["log"]["appended"] for i in (0, 2)] == [1, 1]
    odb = app.databases.open(orch)
    with odb.read():
        steps = odb.sql("SELECT step_id FROM log_events ORDER BY seq")
        contents = odb.sql("SELECT content FROM memories ORDER BY id")
    assert [r[0] for r in steps] == ["s0", "s2"]
    assert [r[0] for r in contents] == ["Step 0 chose plan 0", "Step 2 chose plan 2"]


def test_one_write_back_per_orchestrator_is_counted_then_written_in_one_transaction(
        app: Any) -> None:
    """The soak's shape: each orchestrator one write-back in the job. Its receipt is
    created in one commit, then its data, receipt and result in ONE more write
    transaction (savepoints inside), not one transaction for each of them."""
    task = app.tasks[WRITEBACK]
    orchestrators = [unique_id(f"single-{n}") for n in range(3)]
    texts = distinct_texts(len(orchestrators), seed=53)
    items = [facts(orch, [text])[0] for orch, text in zip(orchestrators, texts, strict=True)]
    begun: list[str] = []
    for orch in orchestrators:
        connection = app.databases.open(orch).db.connection()
        connection.set_trace_callback(
            lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None)
    outcomes = apply_batch(task, items)
    assert [o.state for o in outcomes] == [SUCCESS] * len(orchestrators)
    assert all(len(o.value["created"]) == 1 for o in outcomes)
    assert begun == ["BEGIN IMMEDIATE"] * (2 * len(orchestrators)), begun
