"""The write path end to end: client → Redis queue → real Celery worker → SQLite."""

from __future__ import annotations

from typing import Any

import pytest
from celery import Celery
from orchmem_testing import WorkerProcess, task_events, unique_id, wait_until

from orchmem.config import MemoryValidationError, ScopeViolation, Settings
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import OrchmemCelery
from orchmem.worker.runtime.publish import publish
from orchmem.worker.runtime.shards import queue_name, shard_for

pytestmark = pytest.mark.usefixtures("worker")

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
TIMEOUT = 60


def fact(content: str, **extra: Any) -> dict[str, Any]:
    return {"type": "Fact", "content": content, "source": MANUAL, **extra}


def write(app: OrchmemCelery, orch: str, payload: dict[str, Any]) -> dict[str, Any]:
    _, result = publish(app, WRITEBACK, orch, "wb", payload)
    return dict(result.get(timeout=TIMEOUT))


def contents(settings: Settings, orch: str) -> list[str]:
    odb = Databases(settings).open(orch, create=False)
    return [] if odb is None else sorted(n.content for n in list_memories(odb, limit=10_000))


def test_written_memory_is_read_back(app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    result = write(app, orch_id, {"memories": [fact("The launch is on 3 March", importance=80)]})
    assert result["ok"] and len(result["memoryIds"]) == 1
    [node] = list_memories(Databases(settings).open(orch_id))
    assert node.memory_id == result["memoryIds"][0]
    assert (node.content, node.importance, node.type.value) == ("The launch is on 3 March", 80,
                                                                "Fact")
    assert result["embedded"] == 1


def test_same_idempotency_key_writes_once_and_returns_the_same_ids(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    first = write(app, orch_id, {"idempotencyKey": "order-42", "memories": [fact("A")]})
    again = write(app, orch_id, {"idempotencyKey": "order-42", "memories": [fact("A")]})
    other = write(app, orch_id, {"idempotencyKey": "order-42", "memories": [fact("B")]})
    assert again["memoryIds"] == first["memoryIds"] == other["memoryIds"]
    assert again["duplicate"] and other["duplicate"]
    assert contents(settings, orch_id) == ["A"]


def test_identical_payload_without_a_key_writes_once(app: OrchmemCelery, settings: Settings,
                                                     orch_id: str) -> None:
    first = write(app, orch_id, {"memories": [fact("same payload")]})
    second = write(app, orch_id, {"memories": [fact("same payload")]})
    assert first["idempotencyKey"] == second["idempotencyKey"]
    assert second["duplicate"] and second["memoryIds"] == first["memoryIds"]
    assert contents(settings, orch_id) == ["same payload"]


def test_tasks_of_one_orchestrator_apply_in_publish_order(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    texts = [f"step {i:03d}: the {animal} visited {city}" for i, (animal, city) in enumerate(
        (a, c) for a in ("otter", "heron", "lynx", "bison", "gecko")
        for c in ("Oslo", "Quito", "Hanoi", "Lagos", "Perth", "Tunis", "Davos", "Cusco"))]
    results = [publish(app, WRITEBACK, orch_id, "wb", {"memories": [fact(text)]})[1]
               for text in texts]
    for result in results:
        result.get(timeout=TIMEOUT)
    odb = Databases(settings).open(orch_id)
    with odb.bound():
        rows = odb.db.execute_sql("SELECT content FROM memories ORDER BY id").fetchall()
    assert [r[0] for r in rows] == texts


def test_two_orchestrators_write_to_two_files_and_never_see_each_other(
        app: OrchmemCelery, settings: Settings) -> None:
    a, b = unique_id("iso-a"), unique_id("iso-b")
    write(app, a, {"memories": [fact("only in A")]})
    write(app, b, {"memories": [fact("only in B")]})
    assert contents(settings, a) == ["only in A"]
    assert contents(settings, b) == ["only in B"]
    assert settings.runtime_root(a) != settings.runtime_root(b)


@pytest.mark.parametrize("payload", [
    {"memories": [{"type": "facts", "content": "x", "source": MANUAL}]},
    {"memories": [fact("x", importance=101)]},
    {"memories": [fact("x", confidence="high")]},
    {"memories": [{"content": "no type", "source": MANUAL}]},
    {"memories": "not a list"},
    {"memories": [fact("x")], "unexpected": True},
    {"idempotencyKey": "has spaces in it", "memories": [fact("x")]},
    ["not", "an", "object"],
])
def test_malformed_payload_fails_with_a_validation_error_and_the_worker_goes_on(
        app: OrchmemCelery, settings: Settings, orch_id: str, payload: Any) -> None:
    result = app.send_task(WRITEBACK, kwargs={"orchestrator_id": orch_id, "payload": payload})
    value = result.get(timeout=TIMEOUT, propagate=False)
    assert result.failed()
    assert isinstance(value, MemoryValidationError), value
    log = read_log(settings.runtime_root(orch_id) / "memory" / "logs" / "memory.log")
    assert any(r["event"] == "task_failed" and r["error"] == "validation" for r in log)
    # The worker keeps consuming: the next good task succeeds.
    assert write(app, orch_id, {"memories": [fact("after the bad one")]})["ok"]


def raw_app(settings: Settings) -> Celery:
    """A plain Celery app without orchmem's router: a forger's view of the broker."""
    forged = Celery("forger", broker=settings.broker_url, backend=settings.broker_url,
                    set_as_current=False)
    forged.conf.update(task_serializer="json", accept_content=["json"],
                       result_accept_content=["json"])
    return forged


def test_invalid_orchestrator_id_is_refused_at_publish_and_by_the_worker(
        app: OrchmemCelery, settings: Settings) -> None:
    with pytest.raises(MemoryValidationError):
        publish(app, WRITEBACK, "../../etc", "wb", {"memories": []})
    queue = queue_name(settings, 0)
    for hostile in ("../../etc", "/abs", "a\x00b", "x" * 1024, "or\u0441h", 42):
        result = raw_app(settings).send_task(
            WRITEBACK, kwargs={"orchestrator_id": hostile, "payload": {"memories": []}},
            queue=queue, routing_key=queue)
        value = result.get(timeout=TIMEOUT, propagate=False)
        assert isinstance(value, MemoryValidationError), value
    assert sorted(p.name for p in (settings.root / "orchestrators").iterdir()
                  if not p.name[0].isalnum()) == []


def test_task_for_b_sent_to_another_shards_queue_is_denied_and_logged(
        app: OrchmemCelery, settings: Settings) -> None:
    b = next(o for o in (unique_id("victim") for _ in range(50)) if shard_for(settings, o) == 1)
    wrong = queue_name(settings, 0)
    result = raw_app(settings).send_task(
        WRITEBACK, kwargs={"orchestrator_id": b, "payload": {"memories": [fact("forged")]}},
        queue=wrong, routing_key=wrong)
    value = result.get(timeout=TIMEOUT, propagate=False)
    assert isinstance(value, ScopeViolation)
    assert contents(settings, b) == []
    assert not settings.runtime_root(b).exists()
    log = read_log(settings.logs_dir / "scope-denials.log")
    assert any(r["event"] == "scope_denied" and r["orchestratorId"] == b for r in log)


def test_missing_task_arguments_fail_without_stopping_the_worker(
        app: OrchmemCelery, orch_id: str) -> None:
    result = app.send_task(WRITEBACK, kwargs={"orchestrator_id": orch_id})
    result.get(timeout=TIMEOUT, propagate=False)
    assert result.failed()
    wait_until(lambda: write(app, orch_id, {"memories": [fact("still alive")]})["ok"],
               timeout=TIMEOUT, message="worker still consuming")


def test_task_events_never_carry_a_result_with_memory_text(
        settings: Settings, app: OrchmemCelery, worker: WorkerProcess) -> None:
    """Flower (and anyone on the broker's event channel) sees task-succeeded events; a
    bulletin's result holds memory text, so events carry only its length."""
    secret = "The harbour gate code is Kestrel-5521"
    with task_events(app) as seen:
        client = MemoryClient(unique_id("quiet-events"), settings, app=app)
        assert client.write_back(memories=[{"type": "Fact", "content": secret, "source": {
            "sourceType": "manual", "capturedBy": "user"}}]).wait(60)["ok"]
        assert secret in client.bulletin(timeout=30).text  # the caller gets the text
        wait_until(lambda: sum(e["type"] == "task-succeeded" for e in seen) >= 2,
                   timeout=20, message="the two tasks' events")
    succeeded = [e for e in seen if e["type"] == "task-succeeded"]
    results = [e["result"] for e in succeeded if "result" in e]  # batched ones carry none
    assert results and all(r.endswith("chars, not shown>") for r in results), succeeded
    assert not any("Kestrel" in str(e) for e in seen)
