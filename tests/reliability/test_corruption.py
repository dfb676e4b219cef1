"""Damaged files are found at open and kept aside; only that orchestrator's memory is
disabled. A read-only or full file system gives clear errors and loses nothing."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import WorkerProcess, distinct_texts, settings_env, wait_until

from orchmem.config import MemoryCorrupt, MemoryDisabled, Settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.storage.db.database import Databases
from orchmem.models.workspace.memlog import read_log
from orchmem.models.writeback.apply import write_memories
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish

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
            # The damage is found by whichever task opens the file first: this write, or
            # the worker's outbox reconciliation at start (a control task, read first),
            # after which the write finds the orchestrator disabled by that finding.
            assert isinstance(error, MemoryCorrupt | MemoryDisabled), (name, error)
            memory = settings.runtime_root(name) / "memory"
            marker = json.loads((memory / "DISABLED.json").read_text())
            assert "integrity check" in marker["reason"], marker
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


#: Set to 1 to run the read-only and full-disk tests on the simulation even where a
#: tmpfs could be mounted (the fallback is then exercised on every machine).
NO_MOUNT = os.environ.get("ORCHMEM_TEST_NO_MOUNT") == "1"
_PR_CAPBSET_DROP = 24
#: Capabilities that let root write whatever the mode bits say (capability.h).
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _drop_dac_override() -> None:
    """In a worker about to exec: without these in its bounding set, root's process
    has no way past the mode bits, so chmod makes the folder read-only for it too."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap})")


@dataclass
class Storage:
    """The folder an orchestrator's memory lives in, whose file system a test turns
    read-only or full.

    A tmpfs where this process may mount one (remounted ``ro`` or resized). Elsewhere
    the same failures reach SQLite's real write path on an ordinary folder:

    - read-only: every entry chmod 0555/0444; a worker started as root has
      CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from its bounding set, since root
      ignores mode bits otherwise (checked by a probe process before the test relies
      on it);
    - full: the worker runs with RLIMIT_FSIZE = ``size`` (soft; hard unlimited), so a
      write past it fails with EFBIG ("disk I/O error" from SQLite); growing the disk
      raises the limit of the running worker and its pool children with prlimit(2).
    """

    point: Path
    failure: str  # "read-only" or "full"
    size: int
    tmpfs: bool
    modes: dict[Path, int] = field(default_factory=dict)

    def preexec(self) -> None:
        """For the worker (WorkerProcess(preexec=...)); nothing on a tmpfs."""
        if self.tmpfs:
            return
        if self.failure == "full":
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.size, resource.RLIM_INFINITY))
        elif os.geteuid() == 0:
            _drop_dac_override()

    @property
    def full_error(self) -> str:
        """What the worker must report when a write does not fit: SQLite's SQLITE_FULL
        and orchmem's hint on a tmpfs; SQLITE_IOERR_WRITE for EFBIG."""
        return ("database or disk is full; the disk is full" if self.tmpfs
                else "disk I/O error")

    def read_only(self) -> None:
        if self.tmpfs:
            subprocess.run(["mount", "-o", "remount,ro", str(self.point)], check=True)
            return
        for path in [*sorted(self.point.rglob("*"), reverse=True), self.point]:
            self.modes[path] = stat.S_IMODE(path.lstat().st_mode)
            path.chmod(0o555 if path.is_dir() else 0o444)
        probe = subprocess.run(
            [sys.executable, "-c", "import sys; open(sys.argv[1], 'a')",
             str(self.point / "probe")], preexec_fn=self.preexec, capture_output=True,
            text=True)
        if probe.returncode == 0 or "PermissionError" not in probe.stderr:
            pytest.fail(f"the read-only simulation does not hold here: {probe.stderr}")

    def writable(self) -> None:
        if self.tmpfs:
            subprocess.run(["mount", "-o", "remount,rw", str(self.point)], check=True)
            return
        for path, mode in self.modes.items():
            path.chmod(mode)
        self.modes.clear()

    def grow(self, worker: WorkerProcess) -> None:
        if self.tmpfs:
            subprocess.run(["mount", "-o", f"remount,size={self.size * 64}", str(self.point)],
                           check=True)
            return
        unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
        assert worker.process is not None
        # The parent first: a child it forks from now on inherits the new limit.
        resource.prlimit(worker.process.pid, resource.RLIMIT_FSIZE, unlimited)
        for pid in worker.pool_children():
            with contextlib.suppress(ProcessLookupError):  # a child that just exited
                resource.prlimit(pid, resource.RLIMIT_FSIZE, unlimited)


def _mount_tmpfs(point: Path, size: int) -> bool:
    if NO_MOUNT or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                          capture_output=True)
    return done.returncode == 0


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Callable[[str, str, int], Storage]]:
    made: list[Storage] = []

    def make(name: str, failure: str, size: int) -> Storage:
        point = tmp_path / name
        point.mkdir()
        made.append(Storage(point, failure, size, tmpfs=_mount_tmpfs(point, size)))
        return made[-1]

    yield make
    for folder in made:
        if folder.tmpfs:
            subprocess.run(["umount", "-l", str(folder.point)], check=False)
        else:
            folder.writable()


def _contents(settings: Settings, orch: str) -> list[str]:
    """The stored contents, sorted, read with a throwaway read-only connection (the test
    must not hold the file)."""
    import sqlite3

    path = settings.runtime_root(orch) / "memory" / "memory.db"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return sorted(str(r[0]) for r in conn.execute("SELECT content FROM memories"))
    finally:
        conn.close()


def _disabled(settings: Settings, orch: str) -> bool:
    return (settings.runtime_root(orch) / "memory" / "DISABLED.json").exists()


def test_a_read_only_folder_gives_a_clear_error_and_the_write_lands_later(
        isolated: Any, storage: Callable[[str, str, int], Storage]) -> None:
    folder = storage("ro", "read-only", 64 * 2**20)
    settings = isolated(shards=1, orchestrators={"frozen": {"runtime_root": str(folder.point)}})
    app = create_app(settings)
    worker = WorkerProcess(settings, preexec=folder.preexec).start(app)
    assert publish(app, WRITEBACK, "frozen", "wb", {"memories": [fact("before")]})[1] \
        .get(60)["ok"]
    worker.stop()  # a file system cannot turn read-only under open files: it is made so
    folder.read_only()  # while no worker runs
    worker = WorkerProcess(settings, preexec=folder.preexec).start(app)
    try:
        _, pending = publish(app, WRITEBACK, "frozen", "wb", {"memories": [fact("during")]})
        retry = _first_retry(settings, "frozen")
        assert "StorageError" in retry and "attempt to write a readonly database" in retry
        assert "the folder or file is read-only: fix its permissions" in retry, retry
        assert not pending.ready()  # retried, not failed
        assert _contents(settings, "frozen") == ["before"]  # what was committed is there
        assert not _disabled(settings, "frozen")  # a storage error, not damage
        # The operator fixes the folder and restarts the worker (a process that opened
        # the file read-only keeps it so): the retried write then lands.
        worker.stop()
        folder.writable()
        worker = WorkerProcess(settings, preexec=folder.preexec).start(app)
        assert pending.get(timeout=90)["ok"]
        assert _contents(settings, "frozen") == ["before", "during"]
    finally:
        worker.stop()


def _first_retry(settings: Settings, orch: str) -> str:
    """While the folder is read-only or full the memory.log cannot be written either: the
    first retry of ``orch``'s task shows in the worker log, as Celery's line with the
    exception that caused it (checked there, not in a path that happens to match)."""

    def retries() -> list[str]:
        return [line for path in (settings.root / "logs").glob("test-worker-*.log")
                for line in path.read_text(errors="replace").splitlines()
                if "] retry: Retry in " in line and f"memory of {orch!r}" in line]

    return str(wait_until(retries, timeout=60, message=f"a retry of {orch}'s task")[0])


def test_a_full_disk_gives_a_clear_error_loses_nothing_and_recovers(
        isolated: Any, storage: Callable[[str, str, int], Storage]) -> None:
    folder = storage("full", "full", 3 * 2**20)
    settings = isolated(shards=1, orchestrators={"cramped": {"runtime_root": str(folder.point)}},
                        memory={"writeback": {"max_memories_per_task": 2000}})
    app = create_app(settings)
    worker = WorkerProcess(settings, preexec=folder.preexec).start(app)
    try:
        stored: list[str] = []
        pending = None
        pending_texts: list[str] = []
        for batch in range(40):
            texts = [t * 3 for t in distinct_texts(200, seed=100 + batch)]
            _, result = publish(app, WRITEBACK, "cramped", "wb",
                                {"memories": [fact(t) for t in texts]})
            # Done, or retrying: a full disk is a storage error, retried with backoff.
            state = wait_until(lambda r=result: r.state in ("SUCCESS", "FAILURE", "RETRY")
                               and r.state, timeout=120, message="the batch to finish or retry")
            if state == "SUCCESS" and result.get()["ok"]:
                stored += texts
                continue
            pending, pending_texts = result, texts
            break
        assert pending is not None, f"the {folder.size}-byte disk never filled up"
        assert stored, "not even one batch fitted"
        retry = _first_retry(settings, "cramped")
        assert "StorageError" in retry and folder.full_error in retry, retry
        assert not pending.ready()  # retried, not failed
        assert _contents(settings, "cramped") == sorted(stored)  # nothing committed lost
        assert not _disabled(settings, "cramped")
        folder.grow(worker)
        assert pending.get(timeout=120)["ok"]
        assert _contents(settings, "cramped") == sorted(stored + pending_texts)
        odb = Databases(settings).open("cramped")
        assert odb is not None and odb.sql("PRAGMA integrity_check")[0][0] == "ok"
    finally:
        worker.stop()
