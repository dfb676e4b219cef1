"""``orchmem up``: the broker (when embedded), one worker per shard, beat, optionally Flower.

Children are separate processes (``python -m orchmem.worker …``) that load the same
settings through the environment. A child that dies unexpectedly is restarted with
a growing delay; Ctrl-C or SIGTERM stops the workers first (a warm shutdown lets the
running task finish), then beat and Flower, then the broker.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orchmem.config import Settings
from orchmem.models.workspace.private import open_private, private_dir
from orchmem.worker.ops.readiness import is_ready
from orchmem.worker.runtime.broker import EmbeddedRedis, broker_url
from orchmem.worker.runtime.redis_clients import broker_client

logger = logging.getLogger(__name__)


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    #: Where the child writes its pid once ready (``--ready-file``); None: not followed.
    ready_file: Path | None = None
    ready: bool = False

    def start(self, env: dict[str, str]) -> None:
        private_dir(self.log_path.parent)
        self.ready = False
        log = open_private(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(self.argv, env=env, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        self.started_at = time.monotonic()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def became_ready(self) -> bool:
        """Whether the running child has just written its ready file (once per start)."""
        if self.ready or self.ready_file is None or not self.alive():
            return False
        assert self.process is not None
        self.ready = is_ready(self.ready_file, self.process.pid)
        return self.ready


@dataclass
class Supervisor:
    settings: Settings
    shards: list[int]
    beat: bool = True
    flower: bool = False
    #: The HTTP API with the web console at /console (`orchmem serve`).
    console: bool = False
    #: A reader for these shards' read queues: `orchmem recall` and remote clients ask it.
    reader: bool = True
    echo: Callable[[str], None] = print
    children: list[Child] = field(default_factory=list)
    broker: EmbeddedRedis | None = None
    _stopping: bool = False
    _broker_ready: bool = False
    _all_ready: bool = False

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "orchmem.worker", *args]

    def followed(self, name: str, *args: str) -> Child:
        """A child that says when it is ready, through ``<logs>/<name>.ready``."""
        ready = self.settings.logs_dir / f"{name}.ready"
        return Child(name, self.command(*args, "--ready-file", str(ready)),
                     self.settings.logs_dir / f"{name}.log", ready_file=ready)

    def run(self) -> int:
        """Start everything and supervise until a signal; returns the exit code."""
        if not self.settings.broker_url:
            self.broker = EmbeddedRedis.start(self.settings)
        url = broker_url(self.settings) if self.broker is None else self.broker.url
        env = {**os.environ, **self.settings.env(), "ORCHMEM_BROKER_URL": url}
        logs = self.settings.logs_dir
        for shard in self.shards:
            self.children.append(self.followed(f"worker-{shard}", "worker", "--shard",
                                               str(shard)))
        if self.reader:
            shards = [a for shard in self.shards for a in ("--shard", str(shard))]
            self.children.append(self.followed("reader", "reader", *shards))
        if self.beat:
            self.children.append(self.followed("beat", "beat"))
        if self.flower:
            self.children.append(Child("flower", self.command("flower"), logs / "flower.log"))
        if self.console:
            self.children.append(Child("console", self.command("serve"), logs / "console.log"))
        for child in self.children:
            child.start(env)
        self._print_banner(url)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT,
                                                                          signal.SIGTERM)}
        try:
            while not self._stopping:
                self._restart_dead(env)
                self._report_ready(url)
                time.sleep(0.5)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.stop()
        return 0

    def _report_ready(self, url: str) -> None:
        """Print one line per part as it becomes ready (broker, workers, reader, beat),
        then ``orchmem: ready`` once all of them are."""
        if not self._broker_ready:
            self._broker_ready = self._broker_answers(url)
            if self._broker_ready:
                self.echo("orchmem: broker ready")
        for child in self.children:
            if child.became_ready():
                self.echo(f"orchmem: {child.name} ready")
        followed = [c for c in self.children if c.ready_file is not None]
        if not self._all_ready and self._broker_ready and all(c.ready for c in followed):
            self._all_ready = True
            self.echo("orchmem: ready")

    def _broker_answers(self, url: str) -> bool:
        """Whether the broker answers a ping now."""
        try:
            return bool(broker_client(url, self.settings, socket_connect_timeout=1,
                                      socket_timeout=1).ping())
        except Exception:  # not up yet (or gone): asked again on the next round
            return False

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.echo(f"orchmem: {signal.Signals(signum).name} received, stopping…")
        self._stopping = True

    def _restart_dead(self, env: dict[str, str]) -> None:
        now = time.monotonic()
        if self.broker is not None and self.broker.process.poll() is not None:
            self.echo("orchmem: embedded broker exited; restarting it (AOF keeps the queue)")
            self.broker = EmbeddedRedis.start(self.settings, port=self.broker.port)
        for child in self.children:
            if child.alive() or child.process is None:
                continue
            if child.next_start == 0.0:
                code = child.process.returncode
                # Ran a while before dying: not a crash loop, so the delay starts over.
                if now - child.started_at > 60:
                    child.restarts = 0
                delay = min(30.0, 0.5 * 2 ** child.restarts)
                child.next_start = now + delay
                self.echo(f"orchmem: {child.name} exited with {code}; restarting in {delay:.1f}s "
                          f"(log: {child.log_path})")
            elif now >= child.next_start:
                child.restarts += 1
                child.next_start = 0.0
                child.start(env)

    def stop(self, timeout_s: float = 30.0) -> None:
        workers = [c for c in self.children if c.name.startswith("worker")]
        others = [c for c in self.children if not c.name.startswith("worker")]
        for group in (workers, others):
            for child in group:
                if child.alive():
                    assert child.process is not None
                    child.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            for child in group:
                if child.process is None:
                    continue
                try:
                    child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.process.kill()
                    child.process.wait()
        if self.broker is not None:
            self.broker.stop()
        self.echo("orchmem: stopped")

    def _print_banner(self, url: str) -> None:
        shown = _mask(url)
        self.echo(f"orchmem up: root {self.settings.root}")
        embedded = f" (embedded, AOF in {self.settings.broker_dir})" if self.broker else ""
        self.echo(f"  broker  {shown}{embedded}")
        for child in self.children:
            pid = child.process.pid if child.process else "-"
            self.echo(f"  {child.name:<9} pid {pid}, log {child.log_path}")
        self.echo("  memory  <root>/orchestrators/<id>/memory/ (memory.db, logs/memory.log)")
        self.echo("Ctrl-C stops everything.")


def _mask(url: str) -> str:
    if "@" in url and ":" in url.split("@", 1)[0]:
        scheme, rest = url.split("://", 1)
        creds, host = rest.split("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url
