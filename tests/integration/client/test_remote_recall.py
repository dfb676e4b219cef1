"""Recall over the queue: a real reader worker answers ``MemoryClient(remote=True)``."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from orchmem_testing import WorkerProcess, distinct_texts, settings_env, unique_id

from orchmem.config import Settings
from orchmem.worker import MemoryClient
from orchmem.worker.runtime.app import OrchmemCelery


@dataclass
class ReaderProcess(WorkerProcess):
    """``orchmem reader`` as a real subprocess."""

    @property
    def hostname_prefix(self) -> str:
        return "orchmem-reader"

    def start(self, app: OrchmemCelery | None = None, timeout: float = 90.0) -> ReaderProcess:
        self.log_path = self.settings.root / "logs" / f"test-reader-{time.time_ns()}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "orchmem.worker", "reader", "--concurrency", "2",
                "--logfile", str(self.log_path), "--loglevel", "INFO", *self.extra_args]
        self.process = subprocess.Popen(args, env=settings_env(self.settings),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        assert app is not None
        self.wait_ready(app, timeout)
        return self


@pytest.fixture(scope="module")
def reader(settings: Settings, app: OrchmemCelery, worker: WorkerProcess
           ) -> Iterator[ReaderProcess]:
    process = ReaderProcess(settings).start(app)
    yield process
    process.stop()


def _memory(content: str, importance: int = 50) -> dict[str, Any]:
    return {"type": "Fact", "content": content, "importance": importance,
            "source": {"sourceType": "manual", "capturedBy": "user"}}


def test_remote_recall_equals_local_recall(settings: Settings, reader: ReaderProcess) -> None:
    orch = unique_id("remote")
    local = MemoryClient(orch, settings)
    texts = distinct_texts(40, seed=5)
    handle = local.write_back(memories=[_memory(t, 30 + i) for i, t in enumerate(texts)])
    assert handle.ok and handle.wait(60)["ok"]
    remote = MemoryClient(orch, settings, remote=True)
    for query in [texts[3], texts[17][:30], "nothing like this at all", texts[0] + texts[1]]:
        mine = local.recall(query, top_n=15)
        theirs = remote.recall(query, top_n=15)
        assert theirs.warnings == [], theirs.warnings
        assert theirs.memory_ids == mine.memory_ids
        # An unrelated question is answered with nothing on both paths (relevance floor).
        assert bool(mine.memory_ids) is (query != "nothing like this at all")
        # Recency is computed at each call's own clock: scores agree to ~1e-8.
        assert [n.scores.score for n in theirs.nodes] == pytest.approx(
            [n.scores.score for n in mine.nodes], rel=1e-6)
    typed = remote.recall(texts[3], types=["Goal"])
    assert typed.nodes == [] and typed.warnings == []


def test_remote_recall_reads_its_own_writes(settings: Settings, reader: ReaderProcess) -> None:
    remote = MemoryClient(unique_id("ryw"), settings, remote=True)
    handle = remote.write_back(memories=[_memory("The quarterly review moved to Thursday")])
    assert handle.ok
    bundle = remote.recall("when is the quarterly review?")  # no wait in between
    assert bundle.warnings == []
    assert bundle.nodes and "Thursday" in bundle.nodes[0].memory.content


def test_a_recall_while_no_reader_runs_fails_fast_with_a_warning(settings: Settings,
                                                                 app: OrchmemCelery) -> None:
    quick = settings.model_copy(update={"reader": settings.reader.model_copy(
        update={"timeout_s": 1.0})})
    # A queue nobody reads: a prefix of its own.
    lonely = quick.model_copy(update={"queue_prefix": "lonely"})
    remote = MemoryClient(unique_id("down"), lonely, remote=True)
    started = time.monotonic()
    bundle = remote.recall("anything")
    assert time.monotonic() - started < 5
    assert bundle.nodes == [] and "no reader answered within 1s" in bundle.warnings[0]


def test_a_remote_recall_keeps_its_scope_view(settings: Settings, reader: ReaderProcess) -> None:
    orch = unique_id("remote-scope")
    local = MemoryClient(orch, settings)
    source = {"sourceType": "manual", "capturedBy": "user"}
    result = local.write_back(memories=[
        {"type": "Fact", "content": "The lighthouse key is kept by Alma", "source": source},
        {"type": "Fact", "content": "The lighthouse lamp was fixed by Bruno", "source": source,
         "scope": "session", "sessionId": "s-b"},
        {"type": "Fact", "content": "The lighthouse door password is Gannet-4410",
         "source": source}]).wait(60)
    shared, bruno, secret = result["memoryIds"]
    remote = MemoryClient(orch, settings, remote=True)
    for session, expected in ((None, {shared}), ("s-b", {shared, bruno}), ("s-x", {shared})):
        theirs = remote.recall("lighthouse", session_id=session)
        assert theirs.warnings == [] and set(theirs.memory_ids) == expected, session
        assert set(local.recall("lighthouse", session_id=session).memory_ids) == expected
    assert secret not in remote.recall("lighthouse door password").memory_ids


def test_a_remote_recall_asks_the_reader_about_time_and_episodes(
        settings: Settings, reader: ReaderProcess) -> None:
    """as_of, latest, route and episodes travel to the reader (a remote client has no
    file to answer them from): the same ids, and the same plan, as the local recall."""
    orch = unique_id("remote-time")
    local = MemoryClient(orch, settings)
    source = {"sourceType": "manual", "capturedBy": "user"}
    old, new = local.write_back(memories=[
        {"type": "Fact", "content": "The team offsite is in Porto", "source": source,
         "createdAt": "2026-01-10T09:00:00Z", "validFrom": "2026-01-10T09:00:00Z"},
        {"type": "Fact", "content": "The team offsite moved to Braga", "source": source,
         "createdAt": "2026-03-02T09:00:00Z", "validFrom": "2026-03-02T09:00:00Z"}],
    ).wait(60)["memoryIds"]
    if local.get([old])[0].status.value == "active":  # the rules may have seen the move
        assert local.supersede(old, by=new, reason="moved").wait(30)["ok"]
    remote = MemoryClient(orch, settings, remote=True)
    asks: list[dict[str, Any]] = [
        {"as_of": "2026-02-01T00:00:00+00:00"}, {"latest": True},
        {"route": True}, {"route": False}, {"episodes": True},
        {"as_of": datetime(2026, 2, 1, tzinfo=UTC), "latest": True},
        {"known_at": "2026-03-01T00:00:00+00:00"},
        {"as_of": "2026-02-01T00:00:00+00:00", "known_at": datetime.now(UTC)}]
    for asked in asks:
        mine = local.recall("where is the team offsite?", **asked)
        theirs = remote.recall("where is the team offsite?", **asked)
        assert theirs.warnings == [] and theirs.memory_ids == mine.memory_ids, asked
        assert theirs.plan == mine.plan and theirs.episodes == mine.episodes, asked
    assert remote.recall("where is the team offsite?", latest=True).memory_ids[0] == new
    future = remote.recall("offsite", as_of="2099-01-01T00:00:00+00:00")
    assert future.nodes == [] and "as_of" in future.warnings[0]  # refused by the reader


def _broker(settings: Settings, app: OrchmemCelery) -> Any:
    from orchmem.worker.runtime.redis_clients import broker_client
    return broker_client(app.conf.broker_url, settings)


def test_a_remote_answer_leaves_nothing_in_the_broker(settings: Settings, app: OrchmemCelery,
                                                       reader: ReaderProcess) -> None:
    """The answer holds memory text: it travels on a reply list that the client's BLPOP
    empties, not in a stored task result (which lived for a day)."""
    orch = unique_id("remote-reply")
    local = MemoryClient(orch, settings)
    text = f"The boathouse code word is {unique_id('heron')}"
    assert local.write_back(memories=[_memory(text)]).wait(60)["ok"]
    remote = MemoryClient(orch, settings, remote=True)
    assert remote.recall("boathouse code word").nodes[0].memory.content == text
    broker = _broker(settings, app)
    assert list(broker.scan_iter("orchmem.reply.*")) == []
    for key in broker.scan_iter("celery-task-meta-*"):  # no stored copy of the answer
        assert text.encode() not in (broker.get(key) or b""), key


def test_a_read_leaves_no_unacked_copy_in_the_broker(settings: Settings, app: OrchmemCelery,
                                                  reader: ReaderProcess) -> None:
    """A reader takes a read off its queue with no ack emulation: kombu writes no copy of
    the message (with the query's text) to its ``unacked`` hash and index, one Redis
    transaction fewer per recall. (Celery still acknowledges: kombu then deletes a tag
    that is not there.)"""
    import threading

    from orchmem.tasks.read import RECALL_READ
    from orchmem.worker.runtime.shards import queue_for

    orch = unique_id("remote-noack")
    local = MemoryClient(orch, settings)
    assert local.write_back(memories=[_memory("The ferry leaves at noon")]).wait(60)["ok"]
    remote = MemoryClient(orch, settings, remote=True)
    remote.recall("ferry")  # warm: the reader has the file open
    commands: list[str] = []
    done = threading.Event()
    with _broker(settings, app).monitor() as monitor:
        def listen() -> None:  # the workers' 1 s BRPOP timeouts keep this loop turning
            for command in monitor.listen():
                commands.append(command["command"])
                if done.is_set():
                    break
        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        time.sleep(0.2)
        assert remote.recall("when does the ferry leave?").nodes
        time.sleep(0.5)  # the reader's ack, if it made one, comes after the answer
        done.set()
        listener.join(10)
    read_queue = queue_for(settings, orch, RECALL_READ)
    assert any(c.startswith(f"LPUSH {read_queue} ") for c in commands), commands
    assert any(c.startswith("EVAL ") and "orchmem.reply." in c for c in commands), commands
    copies = [c for c in commands if c.split(" ", 1)[0] in ("HSET", "ZADD") and "unacked" in c]
    assert copies == [], copies


def test_a_client_of_an_earlier_release_gets_its_answer_from_the_result_store(
        settings: Settings, app: OrchmemCelery, reader: ReaderProcess) -> None:
    """A message without ``reply`` (sent by an earlier release) is answered in full
    through Celery's result store, the same bundle the reply list carries."""
    from orchmem.tasks.publish import send
    from orchmem.tasks.read import RECALL_READ

    orch = unique_id("remote-old-client")
    local = MemoryClient(orch, settings)
    texts = ["The lighthouse keeper logs the weather at dawn",
             "The lighthouse lamp was replaced in March",
             "Fog horns sound every thirty seconds in fog",
             "The keeper's cottage has a red door"]
    assert local.write_back(memories=[_memory(t) for t in texts]).wait(60)["ok"]
    query = "what does the lighthouse keeper do?"
    answer = send(app, RECALL_READ, {"orchestrator_id": orch, "query": query, "options": {},
                                     "pending": [], "wait_s": 0.0}).get(timeout=30)
    assert answer["ok"] is True and answer["pending"] == []
    old_ids = [node["memory"]["memoryId"] for node in answer["bundle"]["nodes"]]
    new = MemoryClient(orch, settings, remote=True).recall(query)
    assert old_ids == new.memory_ids and len(old_ids) >= 2


def test_a_reader_writes_only_to_reply_keys(settings: Settings, app: OrchmemCelery,
                                           reader: ReaderProcess) -> None:
    """A message naming another key (a queue, a result) for the answer is refused: the
    reader never writes there. An answer nobody takes expires within a minute."""
    from orchmem.tasks.publish import send
    from orchmem.tasks.read import RECALL_READ, REPLY_TTL_S

    broker = _broker(settings, app)
    orch = unique_id("remote-keys")
    base = {"orchestrator_id": orch, "query": "anything", "options": {}, "pending": [],
            "wait_s": 0.0}
    victim = f"{settings.queue_prefix}.victim"
    broker.set(victim, "untouched")
    for bad in (victim, "orchmem.reply.XYZ", "orchmem.reply." + "a" * 31, 7):
        answer = send(app, RECALL_READ, {**base, "reply": bad}).get(timeout=30)
        assert answer["ok"] is False and answer["error"] == "validation", bad
    assert broker.get(victim) == b"untouched" and broker.type(victim) == b"string"
    nobody = "orchmem.reply." + "b" * 32
    send(app, RECALL_READ, {**base, "reply": nobody}).get(timeout=30)
    assert broker.llen(nobody) == 1 and 0 < broker.ttl(nobody) <= REPLY_TTL_S
    broker.delete(nobody, victim)


def test_a_reader_sends_no_task_events_and_counts_recalls_in_prometheus(isolated: Any) -> None:
    """reader.task_events is off by default (two events per recall, for Flower), and then
    the client sends no task-sent event for a recall either (Flower would list it as
    never received); with --metrics-port the reader counts and times its recalls, and
    serves the projection lag they saw."""
    import base64
    import json
    import urllib.request

    from orchmem_testing import free_port, wait_until

    from orchmem.worker.runtime.app import create_app

    # A fresh reader's first recall loads the file and warms the model: on a loaded
    # machine that can take longer than the default 5 s.
    settings = isolated(shards=1, reader={"timeout_s": 30.0})
    app = create_app(settings)
    orch = unique_id("remote-quiet")
    assert MemoryClient(orch, settings, immediate=True).write_back(
        memories=[_memory("The kiln is fired on Tuesdays")]).wait(30)["ok"]
    port = free_port()
    process = ReaderProcess(settings, extra_args=["--metrics-port", str(port)]).start(app)
    events = _broker(settings, app).pubsub()
    events.psubscribe("*celeryev/task.*")
    try:
        bundle = MemoryClient(orch, settings, remote=True).recall("when is the kiln fired?")
        assert bundle.warnings == [] and "kiln" in bundle.nodes[0].memory.content
        # The count, and what its recall saw of the projections
        # (docs/operations/tracing.md#metrics): the reader's child writes its metrics
        # files one by one, after the answer is sent, so the scrape waits for all three.
        expected = ['orchmem_tasks_total{outcome="SUCCESS",task="orchmem.read.recall"} 1.0',
                    'orchmem_projection_lag{projection="vectors"} 0.0',
                    'orchmem_projection_lag{projection="episodes"} 0.0']
        text = wait_until(lambda: (lambda t: t if all(e in t for e in expected) else None)(
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
            .read().decode()), 30, message="reader metrics")
        assert all(e in text for e in expected)
        # A write-back's task-sent event shows that the channel carries events.
        MemoryClient(orch, settings).write_back(memories=[_memory("The glaze is blue")])
        seen = []
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            message = events.get_message(timeout=0.2)
            if message and message["type"] == "pmessage":
                envelope = json.loads(message["data"])
                body = json.loads(base64.b64decode(envelope["body"])
                                  if envelope["properties"].get("body_encoding") == "base64"
                                  else envelope["body"])
                seen.append((message["channel"].decode().rsplit("/", 1)[-1], body.get("name")))
        assert seen == [("task.sent", "orchmem.writeback")], seen
    finally:
        events.close()
        process.stop()


def test_a_remote_recall_returns_memories_of_every_source(settings: Settings,
                                                          reader: ReaderProcess) -> None:
    """A memory read back from storage is stored data: one ingested from a file (it has a
    sourcePath), one from a transcript, one from a workflow and a manual one all come back
    through the reader with their provenance, as they do locally."""
    orch = unique_id("remote-sources")
    local = MemoryClient(orch, settings)
    folder = local.databases.workspace(orch).ingest_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kiln.md").write_text("The pottery kiln is fired every Tuesday.\n", "utf-8")
    done = local.ingest_now().wait(60)
    assert done and done["ok"], done
    [entry] = [f for f in done["files"] if f["outcome"] == "ingested"]
    ingested = entry["memoryIds"][0]
    assert local.write_back(transcript={
        "conversationId": "conv-pottery", "messages": [
            {"role": "user", "text": "I prefer stoneware glazes for the pottery mugs."}]},
    ).wait(60)["ok"]
    assert local.write_back(workflow_output={
        "workflowRunId": "run-pottery", "stepId": "plan",
        "output": {"decisions": ["Sell the pottery mugs at the Saturday market"]}},
    ).wait(60)["ok"]
    assert local.write_back(memories=[_memory("The pottery studio rent is due monthly")]
                            ).wait(60)["ok"]
    mine = local.recall("pottery", top_n=20)
    kinds = {n.memory.source.source_type.value for n in mine.nodes}
    assert kinds == {"ingest_file", "channel_transcript", "workflow_output", "manual"}, kinds
    theirs = MemoryClient(orch, settings, remote=True).recall("pottery", top_n=20)
    assert theirs.warnings == [], theirs.warnings
    assert theirs.memory_ids == mine.memory_ids and ingested in theirs.memory_ids
    by_id = {n.memory.memory_id: n.memory for n in theirs.nodes}
    assert by_id[ingested].source.source_path == str(folder / "kiln.md")
    assert [p.model_dump() for p in theirs.provenance] == [
        p.model_dump() for p in mine.provenance]
