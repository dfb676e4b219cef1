"""A batch's results stored together (``worker.batch_results``) against a real Redis:
each task's own result, as Celery's per-task path stores it, in one MGET and one
pipeline for the whole batch (counted by the server's own command statistics)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import states
from celery.result import AsyncResult
from orchmem_testing import RedisServer, make_settings

from orchmem.config import MemoryValidationError
from orchmem.tasks.batch import FAILURE, IGNORED, RETRY, SUCCESS, Outcome, Waiting
from orchmem.worker.runtime.app import OrchmemCelery, create_app
from orchmem.worker.runtime.batch_results import store_results


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    redis = RedisServer(tmp_path / "redis").start()
    yield redis
    redis.stop()


@pytest.fixture
def app(tmp_path: Path, server: RedisServer) -> OrchmemCelery:
    return create_app(make_settings(tmp_path / "root", f"{server.url}/0"))


def calls(server: RedisServer) -> dict[str, int]:
    stats = server.client().info("commandstats")
    return {name: stats.get(f"cmdstat_{name}", {}).get("calls", 0)
            for name in ("get", "mget", "exec", "set", "publish")}


def item(number: int) -> Waiting:
    return Waiting(id=f"task-{number}", kwargs={"orchestrator_id": "o", "payload": {}},
                   request={"delivery_info": {}})


def test_a_batch_stores_each_tasks_own_result_in_one_mget_and_one_pipeline(
        app: OrchmemCelery, server: RedisServer) -> None:
    items = [item(n) for n in range(6)]
    outcomes = [Outcome(SUCCESS, {"ok": True, "n": 0}),
                Outcome(FAILURE, MemoryValidationError("memories[0].content is empty")),
                Outcome(SUCCESS, {"ok": True, "n": 2}),
                Outcome(RETRY, RuntimeError("again later")),
                Outcome(IGNORED),
                Outcome(SUCCESS, {"ok": True, "n": 5})]
    before = calls(server)
    store_results(app.backend, items, outcomes)
    after = calls(server)
    delta = {name: after[name] - before[name] for name in after}
    assert delta == {"get": 0, "mget": 1, "exec": 1, "set": 5, "publish": 5}, delta

    def result(n: int) -> AsyncResult:
        return AsyncResult(f"task-{n}", app=app)

    assert [result(n).get(timeout=5) for n in (0, 2, 5)] == [
        {"ok": True, "n": 0}, {"ok": True, "n": 2}, {"ok": True, "n": 5}]
    assert result(1).state == states.FAILURE
    assert "memories[0].content is empty" in str(result(1).result)
    assert result(3).state == states.RETRY
    assert result(4).state == states.PENDING  # an ignored task stores nothing
    ttl = server.client().ttl(app.backend.get_key_for_task("task-0"))
    assert 0 < ttl <= app.conf.result_expires


def test_a_stored_success_is_never_overwritten_by_a_later_batch(
        app: OrchmemCelery, server: RedisServer) -> None:
    app.backend.mark_as_done("task-0", {"ok": True, "first": True})
    store_results(app.backend, [item(0), item(1)],
                  [Outcome(FAILURE, RuntimeError("a lost worker's duplicate")),
                   Outcome(SUCCESS, {"ok": True})])
    assert AsyncResult("task-0", app=app).get(timeout=5) == {"ok": True, "first": True}
    assert AsyncResult("task-1", app=app).get(timeout=5) == {"ok": True}
