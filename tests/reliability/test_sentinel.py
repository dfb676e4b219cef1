"""A highly available broker with what kombu already supports: Redis Sentinel.

A real master, a real replica and a real sentinel (redis-server in sentinel mode) on
free loopback ports. orchmem is configured with ``broker_url = "sentinel://…"`` and
``sentinel_master``: a real worker takes write-backs through it; then the master is
SIGKILLed, the sentinel promotes the replica, and the same worker and the same client
go on through the new master without a restart.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from orchmem_testing import RedisServer, WorkerProcess, free_port, wait_until

from orchmem.config import ConfigError, load_settings
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.broker import redis_server_binary
from orchmem.worker.runtime.redis_clients import broker_client, sentinel_hosts

MASTER = "orchmem-ha"
MANUAL = {"sourceType": "manual", "capturedBy": "user"}


@dataclass
class SentinelGroup:
    master: RedisServer
    replica: RedisServer
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"sentinel://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)

    def master_port(self) -> int | None:
        try:
            found = self.client().execute_command("SENTINEL", "get-master-addr-by-name",
                                                  MASTER)
        except redis.RedisError:
            return None
        return int(found[1]) if found else None


@pytest.fixture
def sentinel_group(tmp_path: Path) -> Iterator[SentinelGroup]:
    master = RedisServer(tmp_path / "master").start()
    replica = RedisServer(tmp_path / "replica", extra_args=[
        "--replicaof", "127.0.0.1", str(master.port)]).start()
    port = free_port()
    conf = tmp_path / "sentinel.conf"  # sentinel rewrites its file: it must be writable
    conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
                    f"sentinel monitor {MASTER} 127.0.0.1 {master.port} 1\n"
                    f"sentinel down-after-milliseconds {MASTER} 1000\n"
                    f"sentinel failover-timeout {MASTER} 5000\n")
    process = subprocess.Popen([redis_server_binary(), str(conf), "--sentinel"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    group = SentinelGroup(master, replica, port, process)
    try:
        wait_until(lambda: group.master_port() == master.port, timeout=15)
        yield group
    finally:
        process.terminate()
        process.wait(10)
        replica.stop()
        master.stop()


def write(client: MemoryClient, key: str, content: str) -> dict[str, Any]:
    """Publish (again while the broker is failing over) until one publish is accepted,
    then wait for the worker's result."""
    deadline = time.monotonic() + 45
    while True:
        handle = client.write_back(memories=[{"type": "Fact", "content": content,
                                              "source": MANUAL}], idempotency_key=key)
        if handle.ok or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert handle.ok, handle.message
    result = handle.wait(60)
    assert result is not None and result["ok"], result
    return result


def test_a_worker_and_a_client_follow_a_sentinel_failover(
        sentinel_group: SentinelGroup, isolated: Any) -> None:
    settings = isolated(broker_url=sentinel_group.url, sentinel_master=MASTER, shards=1,
                        worker={"visibility_timeout_s": 5})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        client = MemoryClient("ha-bot", settings)
        write(client, "before-failover", "The deploy window is Tuesday at noon")
        direct = broker_client(sentinel_group.url, settings, socket_timeout=2)
        assert direct.connection_pool.connection_kwargs.get("port") is None  # via sentinel
        assert direct.ping()
        wait_until(lambda: sentinel_group.replica.client().info("replication")
                   .get("master_link_status") == "up", timeout=15)

        sentinel_group.master.kill()
        wait_until(lambda: sentinel_group.master_port() == sentinel_group.replica.port,
                   timeout=40)

        write(client, "after-failover", "The rollback owner is Priya from the infra team")
        assert direct.ping()  # the same client object found the new master
        bundle = client.recall("who owns the rollback and when is the deploy window")
        contents = {n.memory.content for n in bundle.nodes}
        assert {"The deploy window is Tuesday at noon",
                "The rollback owner is Priya from the infra team"} <= contents
        assert worker.process is not None and worker.process.poll() is None  # no restart
        assert worker.log_path is not None
        assert "Unrecoverable error" not in worker.log_path.read_text()  # reconnect.py
    finally:
        worker.stop()


def test_sentinel_urls_are_parsed_and_need_a_master_name(tmp_path: Path) -> None:
    hosts, password, db = sentinel_hosts(
        "sentinel://:s3cret@10.0.0.1:26379/2;sentinel://10.0.0.2;sentinel://10.0.0.3:26380")
    assert hosts == [("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.3", 26380)]
    assert (password, db) == ("s3cret", 2)
    with pytest.raises(ConfigError, match="sentinel_master"):
        load_settings(environ={}, root=tmp_path, broker_url="sentinel://10.0.0.1:26379")
    with pytest.raises(ConfigError, match="separated by ';'"):
        load_settings(environ={}, root=tmp_path, sentinel_master=MASTER,
                      broker_url="sentinel://10.0.0.1:26379;redis://10.0.0.2:6379")
    settings = load_settings(environ={}, root=tmp_path, sentinel_master=MASTER,
                             broker_url="sentinel://10.0.0.1:26379")
    conf = create_app(settings).conf
    assert conf.broker_transport_options["master_name"] == MASTER
    assert conf.result_backend_transport_options["master_name"] == MASTER
    assert settings.env()["ORCHMEM_SENTINEL_MASTER"] == MASTER
