"""MemoryClient: read-your-writes, bulletin fallbacks, and degrading instead of raising."""

from __future__ import annotations

from typing import Any

import pytest
from orchmem_testing import WorkerProcess, free_port, wait_until

from orchmem.config import Settings
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import OrchmemCelery, create_app

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


@pytest.mark.usefixtures("worker")
def test_a_recall_sees_this_clients_previous_write(app: OrchmemCelery, settings: Settings,
                                                   orch_id: str) -> None:
    client = MemoryClient(orch_id, settings, app=app)
    for i in range(5):
        handle = client.write_back(memories=[{"type": "Fact", "source": MANUAL,
                                              "content": f"Locker {i} code is {1000 + i}"}])
        bundle = client.recall(f"locker {i} code")  # no sleep: the recall waits for it
        assert handle.ok and bundle.nodes[0].memory.content == f"Locker {i} code is {1000 + i}"
        assert not bundle.warnings


def outbox_bytes(client: MemoryClient) -> bytes:
    path = client.outbox.path
    files = [path, path.with_name(path.name + "-wal")]
    return b"".join(f.read_bytes() for f in files if f.exists()).lower()


@pytest.mark.usefixtures("worker")
def test_a_hard_forget_erases_the_finished_outbox_entries_that_said_it(
        app: OrchmemCelery, orch_id: str, settings: Settings) -> None:
    client = MemoryClient(orch_id, settings, app=app)
    written = client.write_back(transcript={"conversationId": "c1", "messages": [
        {"role": "user", "text": "I like hiking in the Alps."}]})
    result = written.wait(60)
    assert result is not None and result["ok"]
    [memory_id] = result["created"]
    assert b"hiking" in outbox_bytes(client)  # kept until the reconciler prunes it
    # A request published but not committed yet must stay: it may still need re-sending.
    client.outbox.record("wb-still-in-flight", WRITEBACK, {"memories": []})
    client.outbox.mark_published("wb-still-in-flight")
    forgot = client.forget(memory_id, hard=True, reason="user asked")
    assert forgot.ok and (forgot.wait(60) or {}).get("ok")
    assert [e.key for e in client.outbox.entries()] == ["wb-still-in-flight"]
    raw = outbox_bytes(client)
    assert b"hiking" not in raw and b"alps" not in raw


def test_bulletin_falls_back_to_the_last_snapshot_then_to_empty(isolated: Any) -> None:
    settings = isolated(shards=1, memory={"bulletin": {"timeout_s": 2}})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    client = MemoryClient("snap", settings, app=app)
    client.write_back(memories=[{"type": "Goal", "content": "Ship the beta", "source": MANUAL}])
    live = client.bulletin(timeout=60)
    assert live.source == "live" and "Ship the beta" in live.text
    # The worker writes the snapshot files after the caller has its answer (tasks/bulletin.py
    # snapshots_later): a stop in between would leave none to fall back to.
    snapshot = client.databases.workspace("snap").bulletins_dir / "latest.json"
    wait_until(snapshot.exists, timeout=30, message="the bulletin snapshot")
    worker.stop()
    fallback = client.bulletin(timeout=1)
    assert fallback.source == "snapshot" and fallback.text == live.text
    assert any("no bulletin within" in w for w in fallback.warnings)
    fresh = MemoryClient("never-seen", settings, app=app).bulletin(timeout=1)
    assert fresh.source == "empty" and fresh.text == "(no memories yet)"
    assert any("empty bulletin" in w for w in fresh.warnings)
    log = read_log(settings.runtime_root("snap") / "memory" / "logs" / "memory.log")
    assert any(r["event"] == "bulletin_fallback" and r["source"] == "snapshot" for r in log)


def test_disabled_memory_degrades_every_call_without_raising(isolated: Any) -> None:
    settings = isolated(orchestrators={"off": {"memory": {"enabled": False}}})
    client = MemoryClient("off", settings)
    assert client.write_back(memories=[{"type": "Fact", "content": "x", "source": MANUAL}]).ok \
        is False
    assert client.recall("anything").nodes == []
    assert "disabled" in client.recall("anything").warnings[0]
    bulletin = client.bulletin()
    assert bulletin.source == "empty" and "disabled" in bulletin.warnings[0]
    context = client.context_for("selector", "hello")
    assert "(no memories yet)" in context.text and context.warnings
    assert client.ingest_now().ok is False


def test_a_corrupt_database_degrades_recall_with_a_warning(isolated: Any) -> None:
    settings = isolated()
    memory = settings.runtime_root("broken") / "memory"
    memory.mkdir(parents=True)
    (memory / "memory.db").write_bytes(b"this is not a database" * 100)
    client = MemoryClient("broken", settings)
    bundle = client.recall("anything")
    assert bundle.nodes == [] and "integrity check" in bundle.warnings[0]


def test_an_unreachable_broker_refuses_writes_but_reads_go_on(isolated: Any,
                                                              settings: Settings) -> None:
    dead = isolated(broker_url=f"redis://127.0.0.1:{free_port()}/0")
    client = MemoryClient("offline", dead)
    handle = client.write_back(memories=[{"type": "Fact", "content": "x", "source": MANUAL}])
    assert handle.ok is False and handle.error == "broker_unavailable"
    assert "not published" in (handle.message or "")
    assert client.recall("x").nodes == []
    assert client.bulletin(timeout=1).source == "empty"


def test_bad_input_is_refused_with_an_error_not_raised(isolated: Any) -> None:
    client = MemoryClient("strict", isolated())
    handle = client.write_back(idempotency_key="has spaces", memories=[])
    assert handle.ok is False and handle.error == "validation"
    assert "idempotencyKey" in [e["path"] for e in handle.errors]
    with pytest.raises(ValueError):
        client.context_for("chitchat", "x")  # type: ignore[arg-type]


def test_a_bulletin_request_drops_no_stored_result_first(isolated: Any) -> None:
    # Its key is new (a uuid): nothing can be stored under its task id, so the publish
    # skips the DEL a re-sent request needs (a round trip per message).
    settings = isolated(shards=1)
    client = MemoryClient("fresh-bulletin", settings, app=create_app(settings))
    redis = client.app.backend.client

    def calls(name: str) -> int:
        return int(redis.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0))

    before = calls("del"), calls("lpush")
    result = client.bulletin(timeout=0.5)  # no worker: it falls back, after the publish
    assert result.source != "live" and calls("lpush") == before[1] + 1
    assert calls("del") == before[0]
