"""Test support: a real Redis server, real worker processes, settings for a temp root."""

from __future__ import annotations

import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from orchmem.config import Settings, load_settings
from orchmem.models.workspace.private import private_dir, write_private
from orchmem.worker.ops.tomlwrite import to_toml
from orchmem.worker.runtime.app import OrchmemCelery, create_app
from orchmem.worker.runtime.broker import redis_server_binary

_counter = itertools.count()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unique_id(prefix: str = "orch") -> str:
    """An orchestratorId no other test in this session uses."""
    clean = re.sub(r"[^A-Za-z0-9_.-]", "-", prefix)[:24].strip("-_.") or "orch"
    return f"{clean}-{os.getpid()}-{next(_counter)}"


@dataclass
class RedisServer:
    """A redis-server on a free loopback port, in its own folder (AOF optional)."""

    directory: Path
    port: int = 0
    password: str | None = None
    appendonly: bool = False
    #: More ``--option value`` arguments for redis-server.
    extra_args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}"

    def start(self) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        args = [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(self.port),
                "--dir", str(self.directory), "--save", "", "--daemonize", "no",
                "--appendonly", "yes" if self.appendonly else "no",
                "--logfile", str(self.directory / "redis.log"), *self.extra_args]
        if self.password:
            args += ["--requirepass", self.password]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if self.client().ping():
                    return self
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, db=db,
                           socket_timeout=5)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


_WORDS = ("amber basil cedar delta ember fjord garnet harbor indigo juniper kettle lantern "
          "meadow nectar orchid pepper quartz raven saffron tundra umber velvet willow xenon "
          "yarrow zephyr anchor bramble canyon dune estuary falcon glacier hollow island "
          "jasmine kelp lagoon marble nomad oasis prairie quiver reef summit thicket").split()


def distinct_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` sentences far apart for the embedding model (no near-duplicate merging)."""
    import random

    rng = random.Random(seed)
    return [f"{i}: " + " ".join(rng.sample(_WORDS, 6)) for i in range(n)]


def make_settings(root: Path, broker_url: str, **overrides: Any) -> Settings:
    """Settings for a test root; ``overrides`` are nested dicts like load_settings takes."""
    return load_settings(environ={}, root=root, broker_url=broker_url, **overrides)


def settings_env(settings: Settings, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a child process that must load exactly ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
    config = settings.root / "orchmem-test.toml"
    private_dir(config.parent)  # made as orchmem makes the root: 0700, the file 0600
    write_private(config, to_toml(settings, exclude_defaults=True))
    env["ORCHMEM_CONFIG"] = str(config)
    env.update(extra or {})
    return env


@dataclass
class WorkerProcess:
    """``orchmem worker`` as a real subprocess, which a test can SIGKILL and restart."""

    settings: Settings
    shards: list[int] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    #: Run in the worker process before it execs (a resource limit, a dropped capability).
    preexec: Callable[[], None] | None = None
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def hostname_prefix(self) -> str:
        shards = self.shards if self.shards is not None else list(range(self.settings.shards))
        return f"orchmem-shard{'-'.join(map(str, shards))}@"

    def start(self, app: OrchmemCelery | None = None, timeout: float = 90.0) -> WorkerProcess:
        args = [sys.executable, "-m", "orchmem.worker", "worker", *self.extra_args]
        for shard in self.shards or []:
            args += ["--shard", str(shard)]
        self.log_path = self.settings.root / "logs" / f"test-worker-{time.time_ns()}.log"
        private_dir(self.log_path.parent)
        args += ["--logfile", str(self.log_path), "--loglevel", "INFO"]
        self.process = subprocess.Popen(args, env=settings_env(self.settings, self.extra_env),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                        start_new_session=True, preexec_fn=self.preexec)
        self.wait_ready(app or create_app(self.settings), timeout)
        return self

    def wait_ready(self, app: OrchmemCelery, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}: {self.log()}")
            replies = app.control.ping(timeout=0.5) or []
            for reply in replies:
                for name in reply:
                    if name.startswith(self.hostname_prefix):
                        return
        raise RuntimeError(f"worker not ready after {timeout}s: {self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-4000:] if self.log_path else ""
        except OSError:
            return ""

    def pool_children(self) -> list[int]:
        """PIDs of the worker's pool processes (children of its main process)."""
        if self.process is None:
            return []
        children = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("PPid:") and int(line.split()[1]) == self.process.pid:
                    children.append(int(entry.name))
        return children

    def kill(self) -> None:
        """SIGKILL the whole worker (parent and pool children)."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 20.0) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def receipt(db_path: Path, key: str) -> tuple[str, int] | None:
    """(status, deliveries) of an idempotency key, read with a plain sqlite3 connection."""
    import sqlite3

    if not db_path.exists():
        return None
    conn = sqlite3.connect(db_path, timeout=10)
    try:
        row = conn.execute("SELECT status, deliveries FROM task_receipts WHERE key = ?",
                           (key,)).fetchone()
        return (str(row[0]), int(row[1])) if row else None
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()


def wait_until(predicate: Any, timeout: float = 30.0, interval: float = 0.05,
               message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")



@contextmanager
def finishes_within(seconds: int, what: str) -> Iterator[None]:
    """Fails the test when the block runs past ``seconds`` (a SIGALRM interrupts even a
    running regular expression). Only for bounds far above the expected time: it
    catches pathological slowness, never measures speed."""

    def expired(signum: int, frame: Any) -> None:
        raise AssertionError(f"{what} ran for more than {seconds}s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def open_odb(memory: Any) -> Any:
    """The open database of a ``MemoryClient``'s own orchestrator (it must exist)."""
    odb = memory.databases.open(memory.orchestrator_id)
    assert odb is not None, memory.orchestrator_id
    return odb


@contextmanager
def task_events(app: OrchmemCelery) -> Iterator[list[dict[str, Any]]]:
    """Every Celery event on ``app``'s broker while the block runs, in arrival order.

    One subscription for the whole block: ``capture`` with a timeout would leave the
    fanout between its rounds, and an event published then reaches nobody."""
    seen: list[dict[str, Any]] = []
    ready = threading.Event()
    with app.connection() as conn:
        receiver = app.events.Receiver(conn, handlers={"*": seen.append})
        receiver.on_iteration = ready.set  # type: ignore[method-assign]
        thread = threading.Thread(target=receiver.capture,
                                  kwargs={"limit": None, "timeout": None, "wakeup": False},
                                  daemon=True)
        thread.start()
        ready.wait(10)
        time.sleep(0.5)  # the fanout is subscribed in the first poll
        try:
            yield seen
        finally:
            receiver.should_stop = True
            thread.join(5)
