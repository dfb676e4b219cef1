"""Isolation and security: hostile ids, 1,000 forged cross-orchestrator attempts, the
broker password, Flower auth (tests/integration/runtime/test_operations.py) and pickle."""

from __future__ import annotations

import os
import pickle
import random
import shlex
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from kombu import Connection, Exchange, Producer
from orchmem_testing import WorkerProcess, unique_id, wait_until

from orchmem.config import MemoryValidationError, ScopeViolation, Settings
from orchmem.models.storage.db.database import Databases
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.edits import EDIT
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime import broker as broker_module
from orchmem.worker.runtime.app import OrchmemCelery
from orchmem.worker.runtime.broker import EmbeddedRedis
from orchmem.worker.runtime.publish import publish
from orchmem.worker.runtime.shards import queue_for, shard_for

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
HOSTILE_IDS = ["../x", "../../etc/passwd", "/abs/path", "a\x00b", "x" * 1024, "or\u0441h",
               "\uff4frch", "a b", ".hidden", "-flag", "", "a/b", "\\\\server", "CON\n"]


def _tree(top: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under ``top`` (relative path -> kind, size, mtime), symlinks unfollowed."""
    entries = {}
    for path in [top, *top.rglob("*")]:
        info = path.lstat()
        kind = "dir" if path.is_dir() and not path.is_symlink() else "other"
        entries[str(path.relative_to(top))] = (kind, info.st_size, info.st_mtime_ns)
    return entries


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_hostile_ids_are_refused_before_a_folder_or_a_queue_is_touched(
        settings: Settings, isolated: Any, tmp_path: Path, hostile: str) -> None:
    # A root of its own (the session broker, no worker writing there), so nothing in
    # tmp_path changes legitimately: the whole tree around the root is compared, which
    # also covers what "../x" or "../../etc/passwd" would reach from orchestrators/.
    own = isolated(broker_url=settings.broker_url)
    assert own.root.parent == tmp_path
    (own.root / "orchestrators" / "existing").mkdir(parents=True)
    # Where the id would lead from orchestrators/ if it were used as a path; an absolute
    # id leaves tmp_path, so that place is checked by itself.
    target = Path(os.path.abspath(own.root / "orchestrators" / hostile))
    escapes = not target.is_relative_to(tmp_path)
    existed = escapes and _lexists(target)
    before = _tree(tmp_path)
    with pytest.raises(MemoryValidationError):
        queue_for(own, hostile)
    with pytest.raises(MemoryValidationError):
        MemoryClient(hostile, own)
    with pytest.raises(MemoryValidationError):
        Databases(own).open(hostile)
    assert _tree(tmp_path) == before
    assert not escapes or existed or not _lexists(target)


def _lexists(path: Path) -> bool:
    try:
        return os.path.lexists(path)
    except (OSError, ValueError):  # a name too long or with a NUL byte: nothing there
        return False


class _PathAudit:
    """Records the path of every open, sqlite3.connect, listdir, scandir and mkdir this
    process makes while a watch is on, in any thread. An audit hook cannot be removed:
    it is installed once and returns at once while no watch is on."""

    events = frozenset({"open", "sqlite3.connect", "os.listdir", "os.scandir", "os.mkdir"})
    installed = False
    seen: list[tuple[str, Any]] | None = None

    @classmethod
    def hook(cls, event: str, args: tuple[Any, ...]) -> None:
        seen = cls.seen
        if seen is not None and event in cls.events and args:
            seen.append((event, args[0]))

    @classmethod
    @contextmanager
    def watch(cls) -> Iterator[list[tuple[str, str]]]:
        """(event, real absolute path) pairs, filled in when the block ends."""
        if not cls.installed:
            sys.addaudithook(cls.hook)
            cls.installed = True
        raw: list[tuple[str, Any]] = []
        paths: list[tuple[str, str]] = []
        cls.seen = raw
        try:
            yield paths
        finally:
            cls.seen = None
        for event, target in raw:
            if isinstance(target, (str, bytes, os.PathLike)):
                name = os.fsdecode(target)
                if name.startswith("file:"):  # an SQLite URI
                    name = name.removeprefix("file:").split("?", 1)[0]
                paths.append((event, os.path.realpath(name)))


def _inside(path: str, folder: Path) -> bool:
    top = os.path.realpath(folder)
    return path == top or path.startswith(top + os.sep)


def _ids_on_different_shards(settings: Settings) -> tuple[str, str]:
    owner = unique_id("owner")
    while True:
        intruder = unique_id("intruder")
        if shard_for(settings, intruder) != shard_for(settings, owner):
            return owner, intruder


@pytest.mark.usefixtures("worker")
def test_a_thousand_forged_cross_orchestrator_attempts_are_all_denied_and_logged(
        app: OrchmemCelery, settings: Settings) -> None:
    owner, intruder = _ids_on_different_shards(settings)
    b_ids = publish(app, WRITEBACK, owner, "wb", {"memories": [
        {"type": "Fact", "content": f"secret {i} of the owner", "source": MANUAL}
        for i in range(5)]})[1].get(timeout=60)["memoryIds"]
    publish(app, WRITEBACK, intruder, "wb", {"memories": [
        {"type": "Fact", "content": "the intruder's own note", "source": MANUAL}]})[1] \
        .get(timeout=60)
    client = MemoryClient(intruder, settings, app=app)
    owner_file = str(settings.runtime_root(owner) / "memory" / "memory.db")
    rng = random.Random(4)
    # The intruder's own queue: a task for the owner sent where the intruder's worker
    # takes it.
    forged_queue = queue_for(settings, intruder)
    assert forged_queue != queue_for(settings, owner)
    raw = Celery("forger", broker=settings.broker_url, backend=settings.broker_url,
                 set_as_current=False)
    raw.conf.update(task_serializer="json", accept_content=["json"],
                    result_accept_content=["json"])
    results: list[Any] = []
    denied_locally = 0
    with _PathAudit.watch() as touched:
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
            else:  # a task for the owner pushed onto the intruder's queue
                results.append(raw.send_task(WRITEBACK, kwargs={
                    "orchestrator_id": owner, "payload": {"memories": [
                        {"type": "Fact", "content": f"planted {i}", "source": MANUAL}]}},
                    queue=forged_queue, routing_key=forged_queue))
    assert denied_locally == 400
    for result in results:
        assert isinstance(result.get(timeout=120, propagate=False), ScopeViolation)
    # A's process never opened, listed or connected to anything of B's: not its file,
    # not its folder (the watch sees this very check open that file, below).
    owner_folder = settings.runtime_root(owner)
    assert touched, "the audit hook saw nothing at all"
    assert [t for t in touched if _inside(t[1], owner_folder)] == []
    with _PathAudit.watch() as control:
        rows = sqlite3.connect(owner_file).execute(
            "SELECT content, status FROM memories ORDER BY content").fetchall()
    assert ("sqlite3.connect", os.path.realpath(owner_file)) in control
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


def test_the_embedded_brokers_password_is_never_on_a_command_line(
        isolated: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A running redis-server rewrites its process title, but until then (and for builds
    # that cannot) anyone can read its arguments in /proc. A shim in front of the real
    # binary records /proc/<pid>/cmdline as the server is started: exec keeps the pid.
    real = broker_module.redis_server_binary()
    seen = tmp_path / "cmdline-at-start"
    shim = tmp_path / "bin" / "redis-server"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\ncat /proc/$$/cmdline > {shlex.quote(str(seen))}\n"
                    f"exec {shlex.quote(real)} \"$@\"\n")
    shim.chmod(0o700)
    monkeypatch.setattr(broker_module, "redis_server_binary", lambda: str(shim))
    settings = isolated(broker_url="")
    broker = EmbeddedRedis.start(settings)
    try:
        started = seen.read_bytes()
        running = Path(f"/proc/{broker.process.pid}/cmdline").read_bytes()
        assert str(shim).encode() in started
        assert broker.password.encode() not in started
        assert broker.password.encode() not in running
        config = Path(settings.broker_dir) / "redis.conf"
        assert config.stat().st_mode & 0o777 == 0o600
        assert str(config).encode() in started
        assert redis.Redis(host="127.0.0.1", port=broker.port, password=broker.password).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=broker.port, socket_timeout=2).ping()
    finally:
        broker.stop()


def test_a_pickle_payload_is_refused_and_the_worker_goes_on(isolated: Any) -> None:
    settings = isolated(shards=1)
    from orchmem.worker.runtime.app import create_app

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
