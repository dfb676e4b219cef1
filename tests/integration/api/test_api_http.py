"""The HTTP API over real HTTP: uvicorn on a free port, httpx, the real MiniLM model and
SQLite behind ``MemoryClient(..., immediate=True)`` (no broker needed)."""

from __future__ import annotations

import logging
import random
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from api_testing import ApiServer, immediate_settings, start_api
from orchmem_testing import WorkerProcess, unique_id, wait_until

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.execlog.rules import new_run_id
from orchmem.models.recall.search import recall as local_recall
from orchmem.models.storage.db.database import Databases
from orchmem.models.workspace.folders import Workspace
from orchmem.models.workspace.memlog import read_log

ALPHA, BETA = "alpha", "beta"
BASE = "/v1/orchestrators"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[ApiServer]:
    # ``embedder``: the session's model, loaded once before the server's clients use it.
    settings = immediate_settings(tmp_path_factory.mktemp("api") / "root")
    server = start_api(settings, [ALPHA, BETA])
    yield server
    server.stop()


@pytest.fixture
def http(api: ApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, timeout=60) as client:
        yield client


def _memory(content: str, memory_type: str = "Preference", importance: int = 60
            ) -> dict[str, Any]:
    return {"type": memory_type, "content": content, "importance": importance,
            "source": {"sourceType": "manual", "capturedBy": "user"}}


def _write(http: httpx.Client, api: ApiServer, orch: str, *contents: str) -> list[str]:
    response = http.post(f"{BASE}/{orch}/writeback", headers=api.auth(orch),
                         json={"memories": [_memory(c) for c in contents]})
    assert response.status_code == 200, response.text
    ids: list[str] = response.json()["result"]["memoryIds"]
    return ids


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["ok"] is False and body["error"] == code and body["message"]
    assert isinstance(body["errors"], list)
    return body


def test_health_and_the_openapi_document_need_no_token(http: httpx.Client) -> None:
    assert http.get("/v1/health").json()["ok"] is True
    doc = http.get("/openapi.json").json()
    paths = set(doc["paths"])
    for name in ("recall", "writeback", "supersede", "retract", "link", "forget", "bulletin",
                 "context", "ingest", "stats"):
        assert f"{BASE}/{{orchestratorId}}/{name}" in paths
    assert "channelTranscript" in doc["components"]["schemas"]["WritebackRequest"]["properties"]


def test_writeback_then_recall_answers_the_json_of_the_cli(http: httpx.Client,
                                                           api: ApiServer) -> None:
    tea, _ = _write(http, api, ALPHA, "The user prefers green tea in the morning",
                    "The deploy window is Tuesday afternoon")
    response = http.get(f"{BASE}/{ALPHA}/recall", headers=api.auth(ALPHA),
                        params={"q": "what tea does the user like?", "top_n": 5})
    assert response.status_code == 200, response.text
    remote = response.json()
    local = local_recall(ALPHA, "what tea does the user like?",
                         databases=Databases(api.settings), top_n=5).dump()
    assert remote["nodes"][0]["memory"]["memoryId"] == tea
    assert set(remote) == set(local)
    assert [n["memory"]["memoryId"] for n in remote["nodes"]] == \
        [n["memory"]["memoryId"] for n in local["nodes"]]
    typed = http.get(f"{BASE}/{ALPHA}/recall", headers=api.auth(ALPHA),
                     params={"q": "tea", "type": "Goal"}).json()
    assert typed["nodes"] == []


def test_recall_takes_as_of_latest_route_and_episodes(http: httpx.Client,
                                                      api: ApiServer) -> None:
    _write(http, api, ALPHA, "The lab moved to the fourth floor")
    url, auth = f"{BASE}/{ALPHA}/recall", api.auth(ALPHA)
    for params, local in (
            ({"asOf": "2000-01-01T00:00:00Z"}, {"as_of": "2000-01-01T00:00:00Z"}),
            ({"knownAt": "2000-01-01T00:00:00Z"}, {"known_at": "2000-01-01T00:00:00Z"}),
            ({"latest": "true", "route": "true"}, {"latest": True, "route": True}),
            ({"episodes": "true"}, {"episodes": True})):
        response = http.get(url, headers=auth, params={"q": "where is the lab?", **params})
        assert response.status_code == 200, response.text
        mine = local_recall(ALPHA, "where is the lab?", databases=Databases(api.settings),
                            **local)  # type: ignore[arg-type]
        assert [n["memory"]["memoryId"] for n in response.json()["nodes"]] == mine.memory_ids
        assert response.json().get("plan") == mine.plan, response.json()["warnings"]
    assert http.get(url, headers=auth, params={"q": "lab", "asOf": "2000-01-01T00:00:00Z"}
                    ).json()["nodes"] == []  # nothing was known then
    for bad in ("yesterday", "2099-01-01T00:00:00Z", "2024-05-01T00:00:00"):
        body = _error(http.get(url, headers=auth, params={"q": "lab", "asOf": bad}), 422,
                      "validation")
        assert "as_of" in body["message"], body
    body = _error(http.get(url, headers=auth, params={"q": "lab", "knownAt": "yesterday"}),
                  422, "validation")
    assert "known_at" in body["message"], body
    assert http.get(url, headers=auth, params={"q": "lab", "knownAt": "2000-01-01T00:00:00Z"}
                    ).json()["nodes"] == []  # nothing had been stored then


def test_memory_types_are_matched_in_any_case_and_stored_by_their_name(
        http: httpx.Client, api: ApiServer) -> None:
    response = http.post(f"{BASE}/{BETA}/writeback", headers=api.auth(BETA), json={
        "memories": [_memory("The parking garage closes at midnight", "fact")]})
    assert response.status_code == 200, response.text
    [fact_id] = response.json()["result"]["memoryIds"]
    response = http.get(f"{BASE}/{BETA}/recall", headers=api.auth(BETA),
                        params={"q": "when does the parking garage close?", "type": "FACT"})
    assert response.status_code == 200, response.text
    [node] = response.json()["nodes"]
    assert (node["memory"]["memoryId"], node["memory"]["type"]) == (fact_id, "Fact")


def test_writeback_validates_with_the_workers_models(http: httpx.Client,
                                                     api: ApiServer) -> None:
    url = f"{BASE}/{ALPHA}/writeback"
    bad = _error(http.post(url, headers=api.auth(ALPHA),
                           json={"memories": [{**_memory("x"), "importance": 500}]}),
                 422, "validation")
    assert bad["errors"][0]["path"] == "memories.0.importance"
    _error(http.post(url, headers=api.auth(ALPHA), json={}), 422, "validation")
    _error(http.post(url, headers=api.auth(ALPHA), json={"memories": [], "bogus": 1}),
           422, "validation")
    escape = {**_memory("a file"), "source": {"sourceType": "file", "capturedBy": "user",
                                              "sourcePath": "/etc/passwd"}}
    response = http.post(url, headers=api.auth(ALPHA), json={"memories": [escape]})
    assert response.status_code in (403, 422), response.text
    queued = http.post(url, headers=api.auth(ALPHA), params={"wait": "false"},
                       json={"memories": [_memory("The office plant is a fern")],
                             "idempotencyKey": "plant-1"})
    assert queued.status_code in (200, 202) and queued.json()["idempotencyKey"] == "plant-1"


def test_a_writeback_carries_its_steps_log_events_over_http(http: httpx.Client,
                                                            api: ApiServer) -> None:
    run_id = new_run_id(ALPHA)
    step = [{"runId": run_id, "kind": "prompt", "stepId": "s1", "idempotencyKey": f"{run_id}/1",
             "text": "Which coffee does the team drink?"}]
    written = http.post(f"{BASE}/{ALPHA}/writeback", headers=api.auth(ALPHA), json={
        "memories": [_memory("The team drinks espresso")], "logEvents": step})
    assert written.status_code == 200, written.text
    assert written.json()["result"]["log"]["appended"] == 1
    bad = _error(http.post(f"{BASE}/{ALPHA}/writeback", headers=api.auth(ALPHA), json={
        "memories": [_memory("The team drinks tea")],
        "logEvents": [{**step[0], "kind": "launch"}]}), 422, "validation")
    assert bad["errors"][0]["path"] == "logEvents.0.kind"


def test_edits_supersede_retract_link_and_forget(http: httpx.Client, api: ApiServer) -> None:
    old, other, spare = _write(http, api, ALPHA, "The team standup is at 9:00",
                               "The standup happens in room Juniper",
                               "Lunch orders close at 11:30")
    auth = api.auth(ALPHA)
    superseded = http.post(f"{BASE}/{ALPHA}/supersede", headers=auth,
                           json={"memoryId": old, "content": "The team standup is at 9:30",
                                 "reason": "moved"})
    assert superseded.status_code == 200, superseded.text
    new = superseded.json()["result"]["supersededBy"]
    linked = http.post(f"{BASE}/{ALPHA}/link", headers=auth,
                       json={"fromMemoryId": new, "toMemoryId": other, "edgeType": "RelatedTo"})
    assert linked.status_code == 200 and linked.json()["result"]["edgeIds"]
    retracted = http.post(f"{BASE}/{ALPHA}/retract", headers=auth,
                          json={"memoryId": other, "reason": "room changed"})
    assert retracted.status_code == 200, retracted.text
    forgot = http.post(f"{BASE}/{ALPHA}/forget", headers=auth,
                       json={"memoryId": spare, "hard": True})
    assert forgot.status_code == 200, forgot.text
    found = http.get(f"{BASE}/{ALPHA}/recall", headers=auth,
                     params={"q": "standup lunch", "include_inactive": "true"}).json()
    status = {n["memory"]["memoryId"]: n["memory"]["status"] for n in found["nodes"]}
    assert status.get(old) == "superseded" and status.get(new) == "active"
    _error(http.post(f"{BASE}/{ALPHA}/forget", headers=auth, json={"memoryId": spare[:-1] + (
        "0" if spare[-1] != "0" else "1")}), 404, "not_found")
    _error(http.post(f"{BASE}/{ALPHA}/supersede", headers=auth,
                     json={"memoryId": new, "by": other, "content": "both"}), 422, "validation")
    beta_id = _write(http, api, BETA, "Beta keeps its own secrets")[0]
    _error(http.post(f"{BASE}/{ALPHA}/forget", headers=auth, json={"memoryId": beta_id}),
           403, "scope_violation")


def test_bulletin_context_ingest_and_stats(http: httpx.Client, api: ApiServer) -> None:
    goal = http.post(f"{BASE}/{ALPHA}/writeback", headers=api.auth(ALPHA),
                     json={"memories": [_memory("Ship the billing migration by Friday",
                                                "Goal", 80)]}).json()["result"]["memoryIds"][0]
    auth = api.auth(ALPHA)
    bulletin = http.get(f"{BASE}/{ALPHA}/bulletin", headers=auth).json()
    assert bulletin["source"] == "live" and goal in bulletin["text"]
    context = http.post(f"{BASE}/{ALPHA}/context", headers=auth,
                        json={"purpose": "step", "query": "billing migration"}).json()
    assert goal in context["memoryIds"] and goal in context["text"]
    _error(http.post(f"{BASE}/{ALPHA}/context", headers=auth,
                     json={"purpose": "gossip", "query": "x"}), 422, "validation")
    workspace = Workspace.for_orchestrator(api.settings, ALPHA)
    (workspace.ingest_dir / "notes.md").write_text("# Notes\n\nThe user prefers dark mode.\n")
    scanned = http.post(f"{BASE}/{ALPHA}/ingest", headers=auth, params={"wait": "true"})
    assert scanned.status_code == 200, scanned.text
    assert scanned.json()["result"]["ok"] is True
    stats = http.get(f"{BASE}/{ALPHA}/stats", headers=auth).json()
    assert stats["memories"] >= 1 and "byType" in stats


def test_auth_missing_wrong_and_foreign_tokens(http: httpx.Client, api: ApiServer) -> None:
    url = f"{BASE}/{ALPHA}/recall?q=tea"
    _error(http.get(url), 401, "unauthorized")
    assert http.get(url).headers["www-authenticate"].startswith("Bearer")
    _error(http.get(url, headers={"Authorization": "Bearer nope"}), 401, "unauthorized")
    _error(http.get(url, headers={"Authorization": f"Basic {api.tokens[ALPHA]}"}),
           401, "unauthorized")
    forged = api.tokens[ALPHA][:-2] + ("xx" if not api.tokens[ALPHA].endswith("xx") else "yy")
    _error(http.get(url, headers={"Authorization": f"Bearer {forged}"}), 401, "unauthorized")
    log = Workspace.for_orchestrator(api.settings, BETA).log_path
    before = len([r for r in read_log(log) if r["event"] == "scope_denied"])
    body = _error(http.get(url, headers=api.auth(BETA)), 403, "scope_violation")
    assert "beta" in body["message"]
    denials = [r for r in read_log(log) if r["event"] == "scope_denied"]
    assert len(denials) == before + 1 and denials[-1]["via"] == "http"
    _error(http.post(f"{BASE}/{ALPHA}/writeback", headers=api.auth(BETA),
                     json={"memories": [_memory("planted by beta")]}), 403, "scope_violation")


def test_oversized_and_malformed_bodies(http: httpx.Client, api: ApiServer) -> None:
    url = f"{BASE}/{ALPHA}/writeback"
    auth = {**api.auth(ALPHA), "Content-Type": "application/json"}
    limit = api.settings.api.max_body_bytes
    big = b'{"memories": [], "x": "' + b"a" * limit + b'"}'
    _error(http.post(url, headers=auth, content=big), 413, "too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while read
        yield b'{"memories": [], "x": "'
        for _ in range(limit // 65536 + 2):
            yield b"a" * 65536
        yield b'"}'

    _error(http.post(url, headers=auth, content=chunks()), 413, "too_large")
    for raw in (b"", b"{", b"[1, 2]", b'"text"', b"\xff\xfe", b'{"memories": NaN}',
                b"null", b'{"memories": [{"type": "Fact"}]}'):
        _error(http.post(url, headers=auth, content=raw), 422, "validation")
    assert http.get("/v1/health").status_code == 200


def test_hostile_query_strings(http: httpx.Client, api: ApiServer) -> None:
    url = f"{BASE}/{ALPHA}/recall"
    auth = api.auth(ALPHA)
    limit = api.settings.api.max_query_chars
    _error(http.get(url, headers=auth, params={"q": "tea " * limit}), 422, "validation")
    huge = http.get(f"{url}?q={'a' * 60_000}", headers=auth)
    assert huge.status_code in (400, 414, 422, 431)
    for q in ("tea\x00", "\x1b[31mred", "a\x07b"):
        _error(http.get(url, headers=auth, params={"q": q}), 422, "validation")
    for raw in ("q=%ff%fe%fd", "q=%c3%28", "q=%", "q=%zz", "q=tea&q=coffee",
                'q="%20OR%20*%20NEAR(', "q=tea&top_n=-1", "q=tea&top_n=abc",
                "q=tea&type=Bogus", "q=tea&include_inactive=maybe", "top_n=3"):
        response = http.get(f"{url}?{raw}", headers=auth)
        assert response.status_code in (200, 422), (raw, response.text)
        assert response.json()["ok"] is False if response.status_code == 422 else True
    assert http.get("/v1/health").status_code == 200


def test_access_log_has_no_memory_text(http: httpx.Client, api: ApiServer,
                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="orchmem.api.access")
    http.get(f"{BASE}/{ALPHA}/recall", headers=api.auth(ALPHA),
             params={"q": "confidential salary figures"})
    http.post(f"{BASE}/{ALPHA}/writeback", headers=api.auth(ALPHA),
              json={"memories": [_memory("The confidential code word is heliotrope")]})

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "orchmem.api.access"]

    # The line is written once the response is sent: the client may read it first.
    wait_until(lambda: any(line.startswith(f"POST {BASE}/{ALPHA}/writeback 200 ")
                           for line in lines()), timeout=10, message="the POST's access line")
    assert any(line.startswith(f"GET {BASE}/{ALPHA}/recall 200 ") for line in lines()), lines()
    assert not any("confidential" in line or "heliotrope" in line for line in lines())


def test_unknown_paths_under_an_orchestrator_are_admitted_first(http: httpx.Client,
                                                                api: ApiServer) -> None:
    _error(http.get(f"{BASE}/{ALPHA}/nothing-here"), 401, "unauthorized")
    _error(http.get(f"{BASE}/{ALPHA}/nothing-here", headers=api.auth(BETA)), 403,
           "scope_violation")
    _error(http.get(f"{BASE}/{ALPHA}/nothing-here", headers=api.auth(ALPHA)), 404, "not_found")
    _error(http.get("/v2/else"), 404, "not_found")


def test_serve_refuses_to_listen_off_loopback_without_tokens(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from orchmem.worker.cli.main import main

    result = CliRunner().invoke(main, ["--root", str(tmp_path / "root"), "serve",
                                       "--address", "0.0.0.0", "--port", "1"])
    assert result.exit_code == 1 and "refusing to listen on 0.0.0.0" in result.output


ENDPOINTS = [("GET", "recall?q=tea"), ("GET", "bulletin"), ("GET", "stats"),
             ("POST", "writeback"), ("POST", "supersede"), ("POST", "retract"),
             ("POST", "link"), ("POST", "forget"), ("POST", "context"), ("POST", "ingest"),
             ("GET", "nothing"), ("DELETE", "recall")]


def _forged_target(rng: random.Random) -> str:
    """An orchestratorId that is not alpha: beta, a case twin, a stranger, path tricks
    (not ``..``: the client resolves it, and the path then names no orchestrator)."""
    choices = [BETA, "Alpha", "ALPHA", "alpha.", "alpha-", "alpha_2", "alph", ".",
               "%2e%2e", "beta%2Falpha", "beta%00", "%61lpha%20", "a" * 65,
               "".join(rng.choice(string.ascii_letters + string.digits + "_.-")
                       for _ in range(rng.randint(1, 70))),
               "".join(rng.choice(string.printable.strip().replace("/", "").replace("?", "")
                                  .replace("#", "")) for _ in range(rng.randint(1, 20)))]
    while True:
        target = rng.choice(choices)
        if target.strip():
            return target


def _forged_auth(rng: random.Random, api: ApiServer) -> tuple[dict[str, str], int]:
    """Headers with alpha's or beta's token, mangled or not, and the status they earn."""
    alpha = api.tokens[ALPHA]
    kind = rng.randrange(5)
    if kind == 0:
        return {"Authorization": f"Bearer {alpha}"}, 403
    if kind == 1:
        return {}, 401
    if kind == 2:
        cut = rng.randrange(len(alpha))
        swap = rng.choice([c for c in "AZaz09_-" if c != alpha[cut]])
        return {"Authorization": f"Bearer {alpha[:cut]}{swap}{alpha[cut + 1:]}"}, 401
    if kind == 3:
        scheme = rng.choice(["Basic", "Token", "bearer", "BEARER"])
        return {"Authorization": f"{scheme} {alpha}"}, 403 if scheme.lower() == "bearer" else 401
    return {"Authorization": f"Bearer {api.tokens[BETA]}"}, 403


def test_a_thousand_forged_cross_orchestrator_requests_are_refused_and_logged(
        http: httpx.Client, api: ApiServer) -> None:
    rng = random.Random(20)
    alpha_log = Workspace.for_orchestrator(api.settings, ALPHA).log_path
    beta_log = Workspace.for_orchestrator(api.settings, BETA).log_path
    denied_before = sum(1 for path in (alpha_log, beta_log) for r in read_log(path)
                        if r["event"] == "scope_denied")
    admitted_before = api.counts.admitted
    statuses: dict[int, int] = {}
    for _ in range(1000):
        method, endpoint = rng.choice(ENDPOINTS)
        headers, expected = _forged_auth(rng, api)
        owner = BETA if api.tokens[BETA] in headers.get("Authorization", "") else ALPHA
        target = _forged_target(rng)
        while unquote(target).split("/")[0] == owner:  # a token on its own memory
            target = _forged_target(rng)
        body = {"memories": [_memory("forged memory")], "memoryId": "m-00000000-0000000000000000"}
        response = http.request(method, f"{BASE}/{target}/{endpoint}", headers=headers,
                                json=body if method == "POST" else None)
        assert response.status_code == expected, (method, target, headers, response.text)
        assert response.json()["error"] in ("unauthorized", "scope_violation")
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
    assert api.counts.admitted == admitted_before  # no forged request reached a handler
    denied_after = sum(1 for path in (alpha_log, beta_log) for r in read_log(path)
                       if r["event"] == "scope_denied")
    assert denied_after - denied_before == statuses[403]
    assert statuses[401] > 100 and statuses[403] > 100
    assert not any("forged memory" in str(r) for r in read_log(beta_log))


def test_the_api_in_broker_mode_writes_through_the_worker(settings: Settings,
                                                          worker: WorkerProcess) -> None:
    orch = unique_id("api-broker")
    # A loaded machine may take a while: wait for the worker as long as the CLI does.
    patient = settings.model_copy(update={"api": settings.api.model_copy(
        update={"wait_timeout_s": 50})})
    server = start_api(patient, [orch])
    try:
        with httpx.Client(base_url=server.url, timeout=120) as http:
            written = http.post(f"{BASE}/{orch}/writeback", headers=server.auth(orch),
                                json={"memories": [_memory("The broker path stores this")]})
            assert written.status_code == 200, (written.text, worker.log())
            memory_id = written.json()["result"]["memoryIds"][0]
            found = http.get(f"{BASE}/{orch}/recall", headers=server.auth(orch),
                             params={"q": "what does the broker path store?"}).json()
            assert found["nodes"][0]["memory"]["memoryId"] == memory_id
            queued = http.post(f"{BASE}/{orch}/forget", headers=server.auth(orch),
                               params={"wait": "false"}, json={"memoryId": memory_id})
            assert queued.status_code == 202 and queued.json()["queued"] is True
            # the worker's refusal of a waited edit: its receipt is final, rejected
            assert http.post(f"{BASE}/{orch}/forget", headers=server.auth(orch),
                             json={"memoryId": memory_id, "hard": True}).status_code == 200
            refused = http.post(f"{BASE}/{orch}/recover", headers=server.auth(orch),
                                json={"memoryId": memory_id})
            body = _error(refused, 410, "erased")
            assert body["taskId"] and body["idempotencyKey"], body
    finally:
        server.stop()


def test_a_waited_write_the_worker_has_not_done_answers_202_queued(isolated: Any) -> None:
    settings = isolated(shards=1, api={"wait_timeout_s": 0.5})  # and no worker
    orch = unique_id("api-no-worker")
    server = start_api(settings, [orch])
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            answer = http.post(f"{BASE}/{orch}/writeback", headers=server.auth(orch),
                               json={"memories": [_memory("Nobody writes this yet")]})
        assert answer.status_code == 202, answer.text
        body = answer.json()
        assert body == {"ok": True, "idempotencyKey": body["idempotencyKey"],
                        "taskId": body["taskId"], "queued": True,
                        "warnings": ["no result within 0.5s: it stays queued"]}
        assert body["taskId"] and body["idempotencyKey"].startswith("wb-")
    finally:
        server.stop()
