"""Isolation and security: hostile ids, 1,000 forged cross-orchestrator attempts, the
broker password, Flower auth (tests/integration/test_operations.py) and pickle."""

from __future__ import annotations

import pickle
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from kombu import Connection, Exchange, Producer
from orchmem_testing import WorkerProcess, unique_id, wait_until

from orchmem.config import MemoryValidationError, ScopeViolation, Settings
from orchmem.models.database import Databases
from orchmem.models.memlog import read_log
from orchmem.tasks.edits import EDIT
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.app import OrchmemCelery
from orchmem.worker.broker import EmbeddedRedis
from orchmem.worker.client import MemoryClient
from orchmem.worker.publish import publish
from orchmem.worker.routing import queue_for, queue_name, shard_for

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
HOSTILE_IDS = ["../x", "../../etc/passwd", "/abs/path", "a\x00b", "x" * 1024, "or\u0441h",
               "\uff4frch", "a b", ".hidden", "-flag", "", "a/b", "\\\\server", "CON\n"]


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_hostile_ids_are_refused_before_a_folder_or_a_queue_is_touched(
        settings: Settings, hostile: str) -> None:
    before = {p.name for p in (settings.root / "orchestrators").glob("*")} \
        if (settings.root / "orchestrators").exists() else set()
    with pytest.raises(MemoryValidationError):
        queue_for(settings, hostile)
    client_error = None
    try:
        MemoryClient(hostile, settings)
    except MemoryValidationError as exc:
        client_error = exc
    assert client_error is not None
    with pytest.raises(MemoryValidationError):
        Databases(settings).open(hostile)
    after = {p.name for p in (settings.root / "orchestrators").glob("*")} \
        if (settings.root / "orchestrators").exists() else set()
    assert after == before


@pytest.mark.usefixtures("worker")
def test_a_thousand_forged_cross_orchestrator_attempts_are_all_denied_and_logged(
        app: OrchmemCelery, settings: Settings) -> None:
    owner, intruder = unique_id("owner"), unique_id("intruder")
    b_ids = publish(app, WRITEBACK, owner, "wb", {"memories": [
        {"type": "Fact", "content": f"secret {i} of the owner", "source": MANUAL}
        for i in range(5)]})[1].get(timeout=60)["memoryIds"]
    publish(app, WRITEBACK, intruder, "wb", {"memories": [
        {"type": "Fact", "content": "the intruder's own note", "source": MANUAL}]})[1] \
        .get(timeout=60)
    client = MemoryClient(intruder, settings, app=app)
    owner_file = str(settings.runtime_root(owner) / "memory" / "memory.db")
    rng = random.Random(4)
    forged_queue = next(queue_name(settings, s) for s in range(settings.shards)
                        if s != shard_for(settings, owner))
    raw = Celery("forger", broker=settings.broker_url, backend=settings.broker_url,
                 set_as_current=False)
    raw.conf.update(task_serializer="json", accept_content=["json"],
                    result_accept_content=["json"])
    results: list[Any] = []
    denied_locally = 0
    for i in range(1000):
        kind = i % 5
        if kind == 0:  # recall naming the other orchestrator
            bundle = client.recall("secret", orchestrator_id=owner)
            denied_locally += bundle.nodes == [] and "may not recall" in bundle.warnings[0]
        elif kind == 1:  # recall restricted to the other orchestrator's memoryIds
            bundle = client.recall("secret", memory_ids=[rng.choice(b_ids)])
            denied_locally += bundle.nodes == [] and bool(bundle.warnings)
        elif kind == 2:  # an edit of the other orchestrator's memory, on our own queue
            results.append(publish(app, EDIT, intruder, "edit", {
                "op": rng.choice(["retract", "forget"]), "memoryId": rng.choice(b_ids),
                "reason": "forged", "idempotencyKey": f"forged-edit-{i}"})[1])
        elif kind == 3:  # the other orchestrator's file as a source
            results.append(publish(app, WRITEBACK, intruder, "wb", {"memories": [{
                "type": "Fact", "content": f"forged {i}", "source": {
                    "sourceType": "ingest_file", "capturedBy": "user",
                    "sourcePath": owner_file}}], "idempotencyKey": f"forged-src-{i}"})[1])
        else:  # a task for the owner pushed onto another shard's queue
            results.append(raw.send_task(WRITEBACK, kwargs={
                "orchestrator_id": owner, "payload": {"memories": [
                    {"type": "Fact", "content": f"planted {i}", "source": MANUAL}]}},
                queue=forged_queue, routing_key=forged_queue))
    assert denied_locally == 400
    for result in results:
        assert isinstance(result.get(timeout=120, propagate=False), ScopeViolation)
    rows = sqlite3.connect(owner_file).execute(
        "SELECT content, status FROM memories ORDER BY content").fetchall()
    assert rows == [(f"secret {i} of the owner", "active") for i in range(5)]
    intruder_db = settings.runtime_root(intruder) / "memory" / "memory.db"
    leaked = sqlite3.connect(intruder_db).execute(
        "SELECT count(*) FROM memories WHERE content LIKE 'secret%' OR content LIKE "
        "'forged%'").fetchone()[0]
    assert leaked == 0
    log = read_log(settings.runtime_root(intruder) / "memory" / "logs" / "memory.log")
    assert sum(r["event"] == "scope_denied" for r in log) == 400
    assert sum(r["event"] == "task_failed" and r["error"] == "scope_violation"
               for r in log) == 400
    denials = read_log(settings.logs_dir / "scope-denials.log")
    assert sum(r["orchestratorId"] == owner for r in denials) == 200
    assert owner not in client.databases._open  # the intruder's process never opened it


def test_the_embedded_broker_requires_its_password(isolated: Any) -> None:
    settings = isolated(broker_url="")
    broker = EmbeddedRedis.start(settings)
    try:
        anonymous = redis.Redis(host="127.0.0.1", port=broker.port, socket_timeout=2)
        with pytest.raises(redis.AuthenticationError):
            anonymous.lpush("memory.0", "planted")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=broker.port, password="guess").ping()
        assert redis.Redis(host="127.0.0.1", port=broker.port, password=broker.password).ping()
        assert (Path(settings.broker_dir) / "broker.json").stat().st_mode & 0o077 == 0
    finally:
        broker.stop()


def test_a_pickle_payload_is_refused_and_the_worker_goes_on(isolated: Any) -> None:
    settings = isolated(shards=1)
    from orchmem.worker.app import create_app

    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        marker = settings.root / "pwned"
        payload = f"import os\nos.system('touch {marker}')".encode()

        class Evil:
            def __reduce__(self) -> Any:
                return (exec, (payload.decode(),))

        with Connection(settings.broker_url) as conn:
            producer = Producer(conn.channel(), exchange=Exchange("", type="direct"))
            producer.publish(
                pickle.dumps(Evil()), routing_key="memory.0",
                content_type="application/x-python-serialize", content_encoding="binary",
                headers={"task": WRITEBACK, "id": "evil-1", "argsrepr": "", "kwargsrepr": ""})
        _, result = publish(app, WRITEBACK, "after-evil", "wb", {"memories": [
            {"type": "Fact", "content": "still serving", "source": MANUAL}]})
        assert result.get(timeout=60)["ok"]
        assert not marker.exists()
        wait_until(lambda: "ContentDisallowed" in worker.log() or "disallowed" in worker.log(),
                   30, message="the refusal in the worker log")
    finally:
        worker.stop()
