"""Session fixtures: a real Redis server, a real worker, the real MiniLM model.

Each group of tests that needs its own worker gets its own Redis database number,
so workers never answer each other's pings or take each other's tasks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

# Imported now, not lazily by its plugin at session end: CPython 3.11.7 can fail to
# compile a module late in a long session ("AST constructor recursion depth mismatch").
import hypothesis  # noqa: F401
import pytest
from orchmem_testing import RedisServer, WorkerProcess, make_settings, unique_id

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder, get_embedder
from orchmem.models.writeback.reconcile import Proposed
from orchmem.worker.runtime.app import OrchmemCelery, create_app

_db_numbers = itertools.count(1)
#: The embedding function ingest's ``scan`` takes.
Embed = Callable[[list[Proposed]], tuple[list[Proposed], str | None]]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("root")


def fresh_db_url(server: RedisServer) -> str:
    """A Redis database number of its own (1..15), emptied first."""
    number = next(_db_numbers)
    if number > 15:
        raise RuntimeError("more than 15 isolated worker groups in one session")
    server.client(number).flushdb()
    return f"{server.url}/{number}"


@pytest.fixture(scope="session")
def settings(session_root: Path, redis_server: RedisServer) -> Settings:
    """Settings of the shared session worker: short visibility timeout, 2 shards."""
    return make_settings(session_root, fresh_db_url(redis_server),
                         worker={"visibility_timeout_s": 5, "wait_timeout_s": 60},
                         memory={"ingest": {"min_file_age_s": 0}})


@pytest.fixture(scope="session")
def app(settings: Settings) -> OrchmemCelery:
    return create_app(settings)


@pytest.fixture(scope="session")
def worker(settings: Settings, app: OrchmemCelery) -> Iterator[WorkerProcess]:
    """One real worker process for every shard, shared by the session."""
    process = WorkerProcess(settings).start(app)
    yield process
    process.stop()


@pytest.fixture(scope="session")
def embedder(settings: Settings) -> Embedder:
    """The real all-MiniLM-L6-v2, loaded once per session."""
    return get_embedder(settings.embedding)


@pytest.fixture
def embed(embedder: Embedder) -> Embed:
    """What ingest's ``scan`` takes to embed proposals: the real model, in this process."""

    def run(items: list[Proposed]) -> tuple[list[Proposed], str | None]:
        vectors = embedder.encode([p.memory.content for p in items])
        return [replace(p, vector=v) for p, v in zip(items, vectors, strict=True)], \
            embedder.version

    return run


@pytest.fixture
def orch_id(request: pytest.FixtureRequest) -> str:
    return unique_id(request.node.name.removeprefix("test_"))


@pytest.fixture
def isolated(tmp_path: Path) -> Iterator[Any]:
    """A factory of settings with their own root and their own Redis server (started on
    first use), so a test's workers never meet another test's tasks or pings."""
    servers: list[RedisServer] = []

    def factory(**overrides: Any) -> Settings:
        if "broker_url" in overrides:
            url = overrides.pop("broker_url")
        else:
            if not servers:
                servers.append(RedisServer(tmp_path / "redis").start())
            url = f"{servers[0].url}/0"
        return make_settings(tmp_path / "root", str(url), **overrides)

    yield factory
    for server in servers:
        server.stop()
