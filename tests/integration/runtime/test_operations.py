"""Operations on real processes: beat fan-out jobs, integrity, Flower, metrics, honcho,
workers on disjoint shards, and moving every memory to a new embedding model."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import WorkerProcess, distinct_texts, free_port, settings_env, wait_until

from orchmem.config import MemoryDisabled, Settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import get_embedder, resolve_model_path
from orchmem.models.embedding.reembed import remaining
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases
from orchmem.models.writeback.apply import write_memories
from orchmem.tasks.maintenance import FANOUT
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.broker import flower_password_file, read_state
from orchmem.worker.runtime.publish import publish
from orchmem.worker.runtime.shards import shard_for

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def fact(text: str) -> dict[str, Any]:
    return {"type": "Fact", "content": text, "source": MANUAL}


def http(url: str, auth: str | None = None) -> int:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def orchmem(settings: Settings, *args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "orchmem.worker", *args],
                            env=settings_env(settings, kwargs.pop("env", None)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, **kwargs)


def test_fanout_publishes_each_job_where_it_is_needed(isolated: Any) -> None:
    settings = isolated(shards=1, memory={"ingest": {"min_file_age_s": 0}})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        databases = Databases(settings)
        busy, idle = databases.open("busy"), databases.open("idle")
        assert busy is not None and idle is not None
        (busy.workspace.ingest_dir / "notes.md").write_text("## Decisions\n- Use the beta\n")
        write_memories(busy, key="raw", task="t", memories=[
            validate(MemoryInput, fact("Stored without a vector"))])
        runs = {job: app.send_task(FANOUT, kwargs={"shard": 0, "job": job}).get(timeout=60)
                for job in ("ingest", "reembed", "bulletin", "integrity", "gc")}
        assert runs["ingest"]["published"] == ["busy"]
        assert runs["reembed"]["published"] == ["busy"]
        assert runs["bulletin"]["published"] == ["busy", "idle"]
        assert runs["integrity"]["published"] == ["busy", "idle"]
        wait_until(lambda: not (busy.workspace.ingest_dir / "notes.md").exists(), 60,
                   message="the scheduled ingest")
        version = get_embedder(settings.embedding).version
        wait_until(lambda: remaining(busy, version) == 0, 60, message="the scheduled reembed")
        wait_until(lambda: (busy.workspace.bulletins_dir / "latest.json").exists(), 60,
                   message="the scheduled bulletin")
        again = app.send_task(FANOUT, kwargs={"shard": 0, "job": "bulletin"}).get(timeout=60)
        # Nothing changed since (the reembed does not touch the audit log): nothing to do.
        wait_until(lambda: app.send_task(FANOUT, kwargs={"shard": 0, "job": "bulletin"})
                   .get(timeout=60)["published"] == [], 30, message="bulletins settled")
        assert isinstance(again["published"], list)
    finally:
        worker.stop()


def test_a_corrupt_database_found_by_the_integrity_job_disables_only_it(isolated: Any) -> None:
    settings = isolated(shards=1)
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    for orch in ("healthy", "damaged"):
        publish(app, WRITEBACK, orch, "wb", {"memories": [
            fact(t) for t in distinct_texts(300, seed=len(orch))]})[1].get(timeout=90)
    worker.stop()
    path = settings.runtime_root("damaged") / "memory" / "memory.db"
    with path.open("r+b") as fh:  # damage a few pages in the middle of the b-trees
        fh.seek(4096 * 3)
        fh.write(os.urandom(4096 * 4))
    worker = WorkerProcess(settings).start(app)
    try:
        result = app.send_task(FANOUT, kwargs={"shard": 0, "job": "integrity"}).get(timeout=60)
        # The worker's outbox reconciliation at start may open (and so quarantine) the
        # damaged file first; either way it is disabled and the healthy one is checked.
        assert "healthy" in result["published"], result
        memory = settings.runtime_root("damaged") / "memory"
        wait_until(lambda: (memory / "DISABLED.json").exists(), 60, message="quarantine")
        assert not path.exists()
        assert list((memory / "quarantine").glob("*/memory.db"))
        _, blocked = publish(app, WRITEBACK, "damaged", "wb", {"memories": [fact("x")]})
        assert isinstance(blocked.get(timeout=60, propagate=False), MemoryDisabled)
        _, fine = publish(app, WRITEBACK, "healthy", "wb", {"memories": [fact("still fine")]})
        assert fine.get(timeout=60)["ok"]
        check = subprocess.run([sys.executable, "-m", "orchmem.worker", "check"],
                               env=settings_env(settings), capture_output=True, text=True)
        assert check.returncode == 1
        assert "damaged: disabled" in check.stdout and "healthy: ok" in check.stdout
    finally:
        worker.stop()


def test_flower_needs_auth_off_loopback_and_answers_its_api_with_it(
        isolated: Any) -> None:
    port = free_port()
    settings = isolated(flower={"port": port, "basic_auth": "ops:s3cret"})
    flower = orchmem(settings, "flower")
    try:
        wait_until(lambda: _up(f"http://127.0.0.1:{port}/healthcheck"), 60,
                   interval=0.25, message="flower")
        assert http(f"http://127.0.0.1:{port}/api/workers") == 401
        assert http(f"http://127.0.0.1:{port}/api/workers", "ops:wrong") == 401
        assert http(f"http://127.0.0.1:{port}/api/workers", "ops:s3cret") == 200
    finally:
        os.killpg(flower.pid, signal.SIGTERM)
        flower.wait(20)
    open_to_all = isolated(flower={"address": "0.0.0.0", "port": free_port()})
    refused = orchmem(open_to_all, "flower")
    output = refused.communicate(timeout=60)[0].decode()
    assert refused.returncode != 0 and "without authentication" in output


def test_flower_on_loopback_asks_for_a_generated_password(isolated: Any) -> None:
    port = free_port()
    settings = isolated(flower={"port": port})
    flower = orchmem(settings, "flower")
    try:
        wait_until(lambda: _up(f"http://127.0.0.1:{port}/healthcheck"), 60,
                   interval=0.25, message="flower")
        password_file = flower_password_file(settings)
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        password = password_file.read_text().strip()
        assert len(password) >= 32
        for view in ("/api/workers", "/api/tasks", "/tasks"):
            assert http(f"http://127.0.0.1:{port}{view}") == 401, view
            assert http(f"http://127.0.0.1:{port}{view}", "orchmem:wrong") == 401, view
        assert http(f"http://127.0.0.1:{port}/api/tasks", f"orchmem:{password}") == 200
    finally:
        os.killpg(flower.pid, signal.SIGTERM)
        flower.wait(20)


def _up(url: str) -> bool:
    try:
        return http(url) == 200
    except OSError:
        return False


def test_two_workers_on_disjoint_shards_each_serve_their_own(isolated: Any) -> None:
    settings = isolated(shards=2)
    app = create_app(settings)
    first = WorkerProcess(settings, shards=[0]).start(app)
    second = WorkerProcess(settings, shards=[1]).start(app)
    try:
        names = [f"tenant-{i}" for i in range(40)]
        by_shard = {s: [n for n in names if shard_for(settings, n) == s][:3] for s in (0, 1)}
        workers = {0: first, 1: second}
        for shard, orchestrators in by_shard.items():
            for orch in orchestrators:
                _, result = publish(app, WRITEBACK, orch, "wb", {"memories": [fact(orch)]})
                assert result.get(timeout=90)["ok"]
                # Results keep no task metadata (result_extended is off: it would hold
                # memory text); each worker's own log names the tasks it ran.
                served = [s for s, w in workers.items() if f"[{result.id}]" in w.log()]
                assert served == [shard], (orch, served)
    finally:
        first.stop()
        second.stop()


def test_the_worker_serves_prometheus_metrics(isolated: Any) -> None:
    settings = isolated(shards=1)
    app = create_app(settings)
    port = free_port()
    worker = WorkerProcess(settings, extra_args=["--metrics-port", str(port)]).start(app)
    try:
        publish(app, WRITEBACK, "measured", "wb", {"memories": [fact("one")]})[1].get(timeout=90)
        text = wait_until(lambda: (lambda t: t if "orchmem_tasks_total" in t else None)(
            fetch(f"http://127.0.0.1:{port}/metrics")), 30, message="metrics")
        assert 'orchmem_tasks_total{outcome="SUCCESS",task="orchmem.writeback"}' in text
        assert "orchmem_task_seconds_bucket" in text
        assert 'orchmem_queue_depth{queue="memory.0"} 0.0' in text
    finally:
        worker.stop()


@pytest.mark.skipif(shutil.which("honcho") is None, reason="honcho is in the test extra")
def test_honcho_start_runs_the_procfile_and_it_processes_a_write(tmp_path: Path) -> None:
    root = tmp_path / "root"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
    env.update({"ORCHMEM_ROOT": str(root), "ORCHMEM_FLOWER__PORT": str(free_port())})
    procfile = Path(__file__).resolve().parents[3] / "Procfile"
    honcho = subprocess.Popen(["honcho", "-f", str(procfile), "start"], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        from orchmem.config import load_settings

        settings = load_settings(environ=env)
        wait_until(lambda: read_state(settings) is not None, 60, message="embedded broker")
        app = create_app(settings)
        _, result = publish(app, WRITEBACK, "via-honcho", "wb", {"memories": [fact("hello")]})
        assert result.get(timeout=120)["ok"]
    finally:
        os.killpg(honcho.pid, signal.SIGINT)
        output = honcho.communicate(timeout=60)[0].decode()
    for name in ("broker", "worker0", "worker1", "beat", "flower"):
        assert f"{name}" in output
    assert read_state(settings) is None  # the broker stopped with the rest


def test_a_new_model_moves_every_memory_while_recall_keeps_answering(
        isolated: Any, tmp_path: Path) -> None:
    # A copy of MiniLM in a local folder is "another model": another embedder version.
    other = tmp_path / "minilm-copy"
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), other)
    old = isolated(shards=1)
    app = create_app(old)
    worker = WorkerProcess(old).start(app)
    texts = distinct_texts(120, seed=4)
    publish(app, WRITEBACK, "moving", "wb", {"memories": [fact(t) for t in texts]})[1] \
        .get(timeout=120)
    worker.stop()
    new = old.model_copy(update={"embedding": old.embedding.model_copy(
        update={"model": str(other)})})
    worker = WorkerProcess(new).start(app)
    databases = Databases(new)
    odb = databases.open("moving")
    assert odb is not None
    version = get_embedder(new.embedding).version
    assert remaining(odb, version) == 120
    answers: list[int] = []
    done = threading.Event()

    def keep_recalling() -> None:
        while not done.is_set():
            answers.append(len(recall("moving", texts[7], databases=databases).nodes))
            time.sleep(0.02)

    reader = threading.Thread(target=keep_recalling)
    reader.start()
    try:
        _, result = publish(app, "orchmem.reembed", "moving", "reembed",
                            {"idempotencyKey": "move", "batchSize": 8, "budgetS": 1})
        first = result.get(timeout=120)
        wait_until(lambda: remaining(odb, version) == 0, 180, message="every memory moved")
    finally:
        done.set()
        reader.join()
        worker.stop()
    assert first["embedded"] > 0
    assert answers and min(answers) > 0  # recall answered throughout (FTS, then vectors)
    bundle = recall("moving", texts[7], databases=databases)
    assert bundle.vector_available and bundle.nodes[0].memory.content == texts[7]
    with odb.bound():
        versions = odb.db.execute_sql("SELECT DISTINCT embedder FROM memory_embeddings")
        assert [r[0] for r in versions] == [version]
