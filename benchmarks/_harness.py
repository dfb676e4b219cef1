"""Shared by the benchmarks: a private Redis, a worker process, percentiles, JSON output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from orchmem.config import Settings, load_settings
from orchmem.worker.ops.tomlwrite import to_toml
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.broker import free_port, redis_server_binary


def percentiles(values: Sequence[float], points: Sequence[int] = (50, 95, 99)) -> dict[str, float]:
    if not values:
        return {f"p{p}": float("nan") for p in points}
    arr = np.asarray(values, dtype=float)
    return {f"p{p}": round(float(np.percentile(arr, p)), 3) for p in points}


def emit(data: dict[str, Any]) -> None:
    print(json.dumps(data, indent=2))


@contextmanager
def temp_root(path: str | None) -> Iterator[Path]:
    if path:
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        yield root
    else:
        with tempfile.TemporaryDirectory(prefix="orchmem-bench-") as tmp:
            yield Path(tmp)


@contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """A throwaway redis-server (AOF on, as in production) on a free port."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen([redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port),
                             "--dir", str(directory), "--save", "", "--appendonly", "yes",
                             "--appendfsync", "everysec"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        client = redis.Redis(port=port)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def settings_for(root: Path, broker_url: str, **overrides: Any) -> Settings:
    return load_settings(environ={}, root=root, broker_url=broker_url, **overrides)


@contextmanager
def orchmem_process(settings: Settings, *args: str) -> Iterator[None]:
    """``orchmem ARGS…`` (a worker or a reader) in a subprocess, answering pings when the
    block starts; stopped (SIGTERM, then SIGKILL) when it ends."""
    config = settings.root / "bench.toml"
    config.write_text(to_toml(settings, exclude_defaults=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
    env["ORCHMEM_CONFIG"] = str(config)
    proc = subprocess.Popen([sys.executable, "-m", "orchmem.worker", *args, "--loglevel",
                             "WARNING"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    app = create_app(settings)
    try:
        deadline = time.monotonic() + 120
        while not app.control.ping(timeout=0.5):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"orchmem {args[0]} did not start")
        yield
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def worker_process(settings: Settings,
                   shards: Sequence[int] | None = None) -> AbstractContextManager[None]:
    """``orchmem worker`` in a subprocess, ready (answering pings) when the block starts."""
    return orchmem_process(settings, "worker",
                           *[a for shard in shards or [] for a in ("--shard", str(shard))])
