"""Hostile input over real HTTP (uvicorn on a free port, httpx, the real model and SQLite
behind an immediate-mode server): refusals are 4xx naming the field, never 500s, and
never echo server paths; a removed orchestrator is gone for its tokens too."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_testing import ApiServer, immediate_settings, start_api
from orchmem_testing import WorkerProcess, wait_until

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.workspace.folders import Workspace
from orchmem.worker.api.server import HeaderTimeout, server_config
from orchmem.worker.cli.serve import with_overrides
from orchmem.worker.runtime.shards import shard_for

ALPHA, GONE = "alpha", "gone"
BASE = "/v1/orchestrators"
SOURCE = {"sourceType": "manual", "capturedBy": "user"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[ApiServer]:
    settings = immediate_settings(tmp_path_factory.mktemp("hostile") / "root")
    server = start_api(settings, [ALPHA, GONE])
    yield server
    server.stop()


@pytest.fixture
def http(api: ApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=60) as client:
        yield client


def _refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["ok"] is False and body["error"] == code, body
    return str(body["message"])


def _post(http: httpx.Client, api: ApiServer, path: str, raw: bytes) -> httpx.Response:
    return http.post(f"{BASE}/{ALPHA}/{path}", content=raw,
                     headers={**api.auth(ALPHA), "Content-Type": "application/json"})


def test_json_nested_a_thousand_deep_is_a_validation_error(http: httpx.Client,
                                                           api: ApiServer) -> None:
    deep = b'{"memories": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    assert len(deep) < 2100
    message = _refused(_post(http, api, "writeback", deep), 422, "validation")
    assert "nested deeper than" in message


def test_a_lone_surrogate_is_refused_naming_the_field(http: httpx.Client,
                                                      api: ApiServer) -> None:
    raw = (b'{"memories": [{"type": "Fact", "content": "a\\ud800b", "importance": 50, '
           b'"source": {"sourceType": "manual", "capturedBy": "user"}}]}')
    message = _refused(_post(http, api, "writeback", raw), 422, "validation")
    assert message.startswith("memories.0.content:")
    context = b'{"purpose": "step", "query": "\\udfff"}'
    assert _refused(_post(http, api, "context", context), 422, "validation").startswith("query")


def test_an_as_of_out_of_range_in_utc_is_a_validation_error(http: httpx.Client,
                                                           api: ApiServer) -> None:
    for value in ("0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59"):
        response = http.get(f"{BASE}/{ALPHA}/recall", headers=api.auth(ALPHA),
                            params={"q": "anything", "asOf": value})
        assert _refused(response, 422, "validation").startswith("as_of:")
    memory = {"type": "Fact", "content": "Valid from the dawn of time", "source": SOURCE,
              "validFrom": "0001-01-01T00:00:00+23:59"}
    response = http.post(f"{BASE}/{ALPHA}/writeback", headers=api.auth(ALPHA),
                         json={"memories": [memory]})
    assert "validFrom" in _refused(response, 422, "validation")


@pytest.mark.parametrize("path", ["/proc/self/fd/23", "/proc/self/environ", "/dev/null",
                                  "/sys/kernel/notes", "/proc/../proc/self/maps"])
def test_system_paths_are_refused_without_echoing_server_paths(
        http: httpx.Client, api: ApiServer, path: str) -> None:
    memory = {"type": "Fact", "content": "from a file", "source": {
        **SOURCE, "sourceType": "file", "sourcePath": path}}
    response = http.post(f"{BASE}/{ALPHA}/writeback", headers=api.auth(ALPHA),
                         json={"memories": [memory]})
    message = _refused(response, 403, "scope_violation")
    assert message.startswith("memories.0.source.sourcePath") or "sourcePath" in message
    assert "/proc, /dev and /sys" in message
    assert str(api.settings.root) not in response.text and "/proc/" not in response.text


def test_a_path_outside_the_workspace_names_the_rule_not_the_servers_folders(
        http: httpx.Client, api: ApiServer) -> None:
    outside = api.settings.root.parent / "elsewhere.md"
    outside.write_text("x")
    memory = {"type": "Fact", "content": "from a file", "source": {
        **SOURCE, "sourceType": "file", "sourcePath": str(outside)}}
    response = http.post(f"{BASE}/{ALPHA}/writeback", headers=api.auth(ALPHA),
                         json={"memories": [memory]})
    message = _refused(response, 403, "scope_violation")
    assert "outside the workspace" in message and "shared_paths" in message
    assert str(api.settings.root) not in response.text
    assert str(outside) not in response.text


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, "false", None])
def test_booleans_are_strict(http: httpx.Client, api: ApiServer, value: Any) -> None:
    response = http.post(f"{BASE}/{ALPHA}/writeback", headers=api.auth(ALPHA), json={
        "memories": [{"type": "Fact", "content": f"Kept through a forget ({value!r})",
                      "source": SOURCE}]})
    memory_id = response.json()["result"]["memoryIds"][0]
    response = http.post(f"{BASE}/{ALPHA}/forget", headers=api.auth(ALPHA),
                         json={"memoryId": memory_id, "hard": value})
    assert _refused(response, 422, "validation").startswith("invalid ForgetBody: hard:")
    found = http.get(f"{BASE}/{ALPHA}/recall", headers=api.auth(ALPHA),
                     params={"q": "Kept through a forget"}).json()
    assert memory_id in [n["memory"]["memoryId"] for n in found["nodes"]]


def test_a_removed_orchestrator_answers_not_found_and_writes_nothing(
        http: httpx.Client, api: ApiServer) -> None:
    auth = api.auth(GONE)
    written = http.post(f"{BASE}/{GONE}/writeback", headers=auth, json={
        "memories": [{"type": "Decision", "content": "Ship on Fridays", "source": SOURCE}]})
    assert written.status_code == 200, written.text
    assert "Ship on Fridays" in http.get(f"{BASE}/{GONE}/bulletin", headers=auth).text
    folder = Workspace.for_orchestrator(api.settings, GONE).runtime_root
    shutil.rmtree(folder)

    assert "Ship" not in _refused(http.get(f"{BASE}/{GONE}/bulletin", headers=auth),
                                  404, "not_found")
    _refused(http.get(f"{BASE}/{GONE}/recall", headers=auth, params={"q": "ship"}),
             404, "not_found")
    _refused(http.post(f"{BASE}/{GONE}/writeback", headers=auth, json={
        "memories": [{"type": "Fact", "content": "Lost", "source": SOURCE}]}),
             404, "not_found")
    assert not folder.exists()
    # the other orchestrator is untouched
    assert http.get(f"{BASE}/{ALPHA}/bulletin", headers=api.auth(ALPHA)).status_code == 200


def test_serve_gives_uvicorn_the_keep_alive_and_header_timeouts(api: ApiServer) -> None:
    settings = with_overrides(api.settings, keep_alive_s=7, header_timeout_s=3.5)
    config = server_config(api.app, settings)
    config.load()
    assert config.timeout_keep_alive == 7
    assert issubclass(config.http_protocol_class, HeaderTimeout)
    assert config.http_protocol_class.header_timeout_s == 3.5  # type: ignore[attr-defined]


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (it never answers the half-sent request)."""
    sock.settimeout(60)  # a bound for a broken server, not a measured time
    try:
        return sock.recv(4096) == b""
    except TimeoutError:
        return False


def test_a_half_open_connection_is_closed(tmp_path: Path, embedder: Embedder) -> None:
    settings = with_overrides(immediate_settings(tmp_path / "root"), header_timeout_s=0.5)
    server = start_api(settings, [])
    try:
        with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))) as sock:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: orchmem\r\n")  # no blank line
            assert _closed_by_server(sock)
        with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))) as sock:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: orchmem\r\n\r\n")
            answer = b""
            while not answer.endswith(b"}"):
                answer += sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200")
            sock.sendall(b"GET /v1/health HTTP/1.1\r\n")  # the next request, half sent
            assert _closed_by_server(sock)
    finally:
        server.stop()


def test_one_orchestrators_burst_is_capped_and_another_is_served_meanwhile(
        isolated: Any, embedder: Embedder) -> None:
    # broker mode, no worker yet: A's admitted writes wait for one
    settings = isolated(shards=1, api={"wait_timeout_s": 60,
                                       "max_requests_per_orchestrator": 3})
    server = start_api(settings, ["tenant-a", "tenant-b"])
    worker = WorkerProcess(settings)
    burst = 6
    try:
        with httpx.Client(base_url=server.url, timeout=600) as http, \
                ThreadPoolExecutor(burst) as pool:
            def write(n: int) -> httpx.Response:
                return http.post(f"{BASE}/tenant-a/writeback", headers=server.auth("tenant-a"),
                                 json={"memories": [{"type": "Fact", "source": SOURCE,
                                                     "content": f"Burst fact number {n}"}]})

            futures = [pool.submit(write, n) for n in range(burst)]
            wait_until(lambda: sum(f.done() for f in futures) == burst - 3,
                       message="the requests past the cap answered")
            state = server.app.state.orchmem
            assert state.in_flight("tenant-a") == 3
            refused = [f.result() for f in futures if f.done()]
            for response in refused:
                _refused(response, 429, "too_many_requests")
                assert int(response.headers["Retry-After"]) >= 1
            # A's writes wait for a worker; B and health answer meanwhile
            recall = http.get(f"{BASE}/tenant-b/recall", headers=server.auth("tenant-b"),
                              params={"q": "anything"})
            assert recall.status_code == 200, recall.text
            assert http.get("/v1/health").json()["ok"] is True
            assert sum(not f.done() for f in futures) == 3
            worker.start()
            written = [f.result() for f in futures if f.result().status_code != 429]
        assert [r.status_code for r in written] == [200, 200, 200], [r.text for r in written]
        assert state.in_flight("tenant-a") == 0
    finally:
        worker.stop()
        server.stop()


def test_waiting_writes_hold_no_write_thread(isolated: Any, embedder: Embedder) -> None:
    # two write threads; A's shard has no worker yet, so its writes wait for one
    settings = isolated(shards=2, api={"wait_timeout_s": 120, "write_threads": 2,
                                       "max_requests_per_orchestrator": 8})
    names = [f"tenant-{i}" for i in range(40)]
    a, b = (next(n for n in names if shard_for(settings, n) == s) for s in (0, 1))
    server = start_api(settings, [a, b])
    workers = {s: WorkerProcess(settings, shards=[s]) for s in (0, 1)}
    burst = 6
    try:
        workers[1].start()
        with httpx.Client(base_url=server.url, timeout=600) as http, \
                ThreadPoolExecutor(burst) as pool:
            def write(orch: str, n: int) -> httpx.Response:
                return http.post(f"{BASE}/{orch}/writeback", headers=server.auth(orch),
                                 json={"memories": [{"type": "Fact", "source": SOURCE,
                                                     "content": f"Waiting fact {n} of {orch}"}]})

            futures = [pool.submit(write, a, n) for n in range(burst)]
            state = server.app.state.orchmem
            outbox = state.client(a).outbox
            # six writes published through two threads: none keeps one while it waits
            wait_until(lambda: sum(e.published_at is not None for e in outbox.entries()) == burst,
                       timeout=60, message="all of A's writes published")
            assert state.in_flight(a) == burst
            assert http.get("/v1/health").json()["ok"] is True
            answer = write(b, 0)  # B's worker answers while A's writes still wait
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["ok"] is True
            assert not any(f.done() for f in futures) and state.in_flight(a) == burst
            workers[0].start()
            written = [f.result() for f in futures]
        assert [r.status_code for r in written] == [200] * burst, [r.text for r in written]
        assert all(r.json()["result"]["memoryIds"] for r in written)
        assert state.in_flight(a) == 0
    finally:
        for worker in workers.values():
            worker.stop()
        server.stop()
