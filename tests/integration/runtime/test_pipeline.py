"""The task pipeline and the publish path, on a real SQLite file, run in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import free_port, make_settings, unique_id

from orchmem.config import MemoryValidationError, Settings
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery import receipts
from orchmem.tasks.base import MemoryTask
from orchmem.tasks.publish import envelope, follow_up_key, kwargs_repr, send_envelope, short_repr
from orchmem.worker.runtime.app import OrchmemCelery, create_immediate_app

SECRET = "the vault code is 4471"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0")


@pytest.fixture
def app(settings: Settings) -> OrchmemCelery:
    app = create_immediate_app(settings)
    runs: list[str] = []

    @app.task(base=MemoryTask, bind=True, name="test.forgetful", kind="test", shared=False)
    def forgetful(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> Any:
        def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
            runs.append(key)
            if payload.get("bad"):
                raise MemoryValidationError("bad: refused", [{"path": "bad", "message": "no"}])
            return {"ok": True, "task": self.name, "n": len(runs)}

        return self.pipeline(orchestrator_id, payload, body)

    app.conf.test_runs = runs
    return app


def test_a_task_that_never_finishes_its_receipt_is_completed_by_the_pipeline(
        app: OrchmemCelery) -> None:
    orchestrator_id = unique_id("pipeline")
    env = envelope(orchestrator_id, "test.forgetful", "test", {"idempotencyKey": "k-1"})
    first = send_envelope(app, env).get()
    odb = app.databases.open(orchestrator_id, create=False)
    assert odb is not None and receipts.status(odb, "k-1") == receipts.DONE
    again = send_envelope(app, env).get()
    assert again == {**first, "duplicate": True}
    assert app.conf.test_runs == ["k-1"]


def test_a_rejected_payload_is_final_and_answers_the_same_on_redelivery(
        app: OrchmemCelery) -> None:
    orchestrator_id = unique_id("pipeline-bad")
    env = envelope(orchestrator_id, "test.forgetful", "test",
                   {"idempotencyKey": "k-bad", "bad": True})
    send_envelope(app, env)
    odb = app.databases.open(orchestrator_id, create=False)
    assert odb is not None and receipts.status(odb, "k-bad") == receipts.REJECTED
    again = send_envelope(app, env).get()
    assert again["ok"] is False and again["duplicate"] is True
    assert app.conf.test_runs == ["k-bad"]


def test_a_re_sent_request_keeps_its_task_id() -> None:
    env = envelope("bot", "orchmem.writeback", "wb", {"memories": [{"content": SECRET}]})
    assert env.task_id == f"bot/{env.key}"
    assert envelope("bot", "orchmem.writeback", "wb", env.payload).task_id == env.task_id


def test_flower_never_sees_memory_text() -> None:
    payload = {"memories": [{"content": SECRET}], "op": "supersede", "memoryId": "m-1",
               "content": SECRET, "reason": SECRET, "idempotencyKey": "wb-1"}
    shown = kwargs_repr({"orchestrator_id": "bot", "payload": payload})
    assert "vault" not in shown and "4471" not in shown
    assert "'bot'" in shown and "memories=[1]" in shown and "'wb-1'" in shown
    assert short_repr({"content": SECRET}) == f"{{content=<{len(SECRET)} chars>}}"


def test_follow_up_keys_count_up_instead_of_growing() -> None:
    key = "ingest-abc"
    for _ in range(1000):
        key = follow_up_key(key)
    assert key == "ingest-abc+1000"
    assert follow_up_key("reembed-beat+x") == "reembed-beat+x+1"
