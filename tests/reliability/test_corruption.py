"""Damaged files are found at open and kept aside; only that orchestrator's memory is
disabled. A read-only or full file system gives clear errors and loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import TimeoutError as CeleryTimeout
from orchmem_testing import WorkerProcess, distinct_texts, settings_env, wait_until

from orchmem.config import MemoryCorrupt, MemoryDisabled, Settings
from orchmem.models.database import Databases
from orchmem.models.memlog import read_log
from orchmem.models.schema import MemoryInput, validate
from orchmem.models.writeback import write_memories
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.app import create_app
from orchmem.worker.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def fact(text: str) -> dict[str, Any]:
    return {"type": "Fact", "content": text, "source": MANUAL}


def _truncate(path: Path) -> None:
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(size // 2)


def _damage_pages(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.seek(4096 * 3)
        fh.write(os.urandom(4096 * 4))


def _garbage_wal(path: Path) -> None:
    path.with_name("memory.db-wal").write_bytes(os.urandom(50_000))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "zero-byte": lambda p: p.write_bytes(b""),
    "text": lambda p: p.write_text("this is a text file, not a database\n" * 100),
    "truncated": _truncate,
    "page-damaged": _damage_pages,
    "garbage-wal": _garbage_wal,
}


def seed(settings: Settings, orch: str) -> None:
    odb = Databases(settings).open(orch)
    assert odb is not None
    memories = [validate(MemoryInput, fact(t)) for t in distinct_texts(400, seed=len(orch))]
    write_memories(odb, key="seed", task="t", memories=memories)
    odb.sql("PRAGMA wal_checkpoint(TRUNCATE)")
    odb.close()


def test_each_kind_of_damage_is_detected_quarantined_and_disables_only_it(
        isolated: Any) -> None:
    settings = isolated(shards=1)
    for name in [*DAMAGE, "healthy"]:
        seed(settings, name)
    for name, damage in DAMAGE.items():
        damage(settings.runtime_root(name) / "memory" / "memory.db")
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        for name in DAMAGE:
            _, first = publish(app, WRITEBACK, name, "wb", {"memories": [fact("after")]})
            error = first.get(timeout=60, propagate=False)
            assert isinstance(error, MemoryCorrupt), (name, error)
            memory = settings.runtime_root(name) / "memory"
            marker = json.loads((memory / "DISABLED.json").read_text())
            assert Path(marker["quarantine"]).is_dir()
            kept = {p.name for p in Path(marker["quarantine"]).iterdir()}
            assert "memory.db" in kept or (name == "garbage-wal" and "memory.db-wal" in kept)
            assert not (memory / "memory.db").exists()
            log = read_log(memory / "logs" / "memory.log")
            assert any(r["event"] == "memory_disabled" for r in log)
            _, again = publish(app, WRITEBACK, name, "wb", {"memories": [fact("again")]})
            assert isinstance(again.get(timeout=60, propagate=False), MemoryDisabled)
        _, fine = publish(app, WRITEBACK, "healthy", "wb", {"memories": [fact("fine")]})
        assert fine.get(timeout=60)["ok"]
    finally:
        worker.stop()
    check = subprocess.run([sys.executable, "-m", "orchmem.worker", "check", "--json"],
                           env=settings_env(settings), capture_output=True, text=True)
    assert check.returncode == 1
    report = json.loads(check.stdout)["orchestrators"]
    assert report["healthy"]["status"] == "ok"
    assert all(report[name]["status"] == "disabled" for name in DAMAGE)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    mounted: list[Path] = []

    def mount(name: str, size: str) -> Path:
        point = tmp_path / name
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                               str(point)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _remount(point: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(point)], check=True)


def _count(settings: Settings, orch: str) -> int:
    """Count with a throwaway read-only connection (the test must not hold the file)."""
    import sqlite3

    path = settings.runtime_root(orch) / "memory" / "memory.db"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
    finally:
        conn.close()


def test_a_read_only_folder_gives_a_clear_error_and_the_write_lands_later(
        isolated: Any, tmpfs: Callable[..., Path]) -> None:
    point = tmpfs("ro", "64m")
    settings = isolated(shards=1, orchestrators={"frozen": {"runtime_root": str(point)}})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    publish(app, WRITEBACK, "frozen", "wb", {"memories": [fact("before")]})[1].get(60)
    worker.stop()  # a file system cannot turn read-only under open files: it is mounted so
    _remount(point, "ro")
    worker = WorkerProcess(settings).start(app)
    try:
        _, pending = publish(app, WRITEBACK, "frozen", "wb", {"memories": [fact("during")]})
        record = _wait_retry_any(settings, "frozen", ("readonly", "read-only", "Read-only"))
        assert "read-only" in record["message"] or "readonly" in record["message"]
        assert _count(settings, "frozen") == 1  # what was committed is still there
        # The operator fixes the mount and restarts the worker (a process that opened
        # the file read-only keeps it so): the retried write then lands.
        worker.stop()
        _remount(point, "rw")
        worker = WorkerProcess(settings).start(app)
        assert pending.get(timeout=90)["ok"]
        assert _count(settings, "frozen") == 2
    finally:
        worker.stop()


def _wait_retry_any(settings: Settings, orch: str, needles: tuple[str, ...]) -> dict[str, Any]:
    """While the folder is read-only the memory.log cannot be written either: the retry
    shows in the worker log; return a record built from it."""
    record: dict[str, Any] = {}

    def found() -> bool:
        for path in (settings.root / "logs").glob("test-worker-*.log"):
            for line in path.read_text(errors="replace").splitlines():
                if "retry" in line.lower() and any(n in line for n in needles):
                    record["message"] = line
                    return True
        return False

    wait_until(found, timeout=60, message="the worker to report the read-only folder")
    return record


def test_a_full_disk_gives_a_clear_error_loses_nothing_and_recovers(
        isolated: Any, tmpfs: Callable[..., Path]) -> None:
    point = tmpfs("full", "3m")
    settings = isolated(shards=1, orchestrators={"cramped": {"runtime_root": str(point)}},
                        memory={"writeback": {"max_memories_per_task": 2000}})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        stored = 0
        pending = None
        for batch in range(40):
            texts = distinct_texts(200, seed=100 + batch)
            _, result = publish(app, WRITEBACK, "cramped", "wb",
                                {"memories": [fact(t * 3) for t in texts]})
            try:
                value = result.get(timeout=20, propagate=False)
            except CeleryTimeout:  # retrying on a full disk
                value = None
            if isinstance(value, dict) and value.get("ok"):
                stored += 200
                continue
            pending = result
            break
        assert pending is not None, "the 3 MB file system never filled up"
        _wait_retry_any(settings, "cramped", ("full", "disk"))
        assert _count(settings, "cramped") == stored  # nothing committed was lost
        _remount(point, "size=200m")
        assert pending.get(timeout=120)["ok"]
        assert _count(settings, "cramped") == stored + 200
        odb = Databases(settings).open("cramped")
        assert odb is not None and odb.sql("PRAGMA integrity_check")[0][0] == "ok"
    finally:
        worker.stop()
