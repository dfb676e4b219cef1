"""Real MCP client sessions: the SDK's client over stdio launching ``orchmem mcp``, and
over streamable HTTP behind the token rule."""

from __future__ import annotations

import functools
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn
from api_testing import immediate_settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from orchmem_testing import WorkerProcess, free_port, settings_env, unique_id, wait_until

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.storage.delivery.outbox import Outbox
from orchmem.models.workspace.folders import Workspace
from orchmem.worker.api.tokens import TokenStore
from orchmem.worker.mcp.http import mcp_http_app

FOREIGN = "m-00000000-0000000000000000"
TOOLS = {"remember", "recall", "bulletin", "forget", "recover", "supersede"}


async def _session(params: StdioServerParameters) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with Client(params) as client:
        listed = await client.list_tools()
        seen["tools"] = {t.name: t for t in listed.tools}
        stored = await client.call_tool("remember", {
            "content": "The user prefers answers in French", "type": "Preference",
            "importance": 70})
        seen["remember"] = stored.structured_content
        found = await client.call_tool("recall", {"query": "which language should I answer in?"})
        seen["recall"] = found.structured_content
        memory_id = seen["remember"]["memoryIds"][0]
        renewed = await client.call_tool("supersede", {
            "memory_id": memory_id, "content": "The user prefers answers in German"})
        seen["supersede"] = renewed.structured_content
        new_id = seen["supersede"]["supersededBy"]
        seen["forget"] = (await client.call_tool("forget", {"memory_id": new_id})
                          ).structured_content
        seen["after"] = (await client.call_tool("recall", {"query": "answer language"})
                         ).structured_content
        seen["unknown"] = await client.call_tool("forget", {"memory_id": memory_id[:11] + "0" * 16})
        seen["foreign"] = await client.call_tool("forget", {"memory_id": FOREIGN})
        resource = await client.read_resource("memory://bulletin")
        seen["resource"] = resource.contents[0]
        seen["lower"] = (await client.call_tool("remember", {
            "content": "Book the venue for the offsite", "type": "todo"})).structured_content
        seen["todo"] = (await client.call_tool("recall", {"query": "book the offsite venue"})
                        ).structured_content
    return seen


def test_an_mcp_client_lists_the_tools_remembers_recalls_and_forgets(tmp_path: Path) -> None:
    settings = immediate_settings(tmp_path / "root")
    orch = unique_id("mcp")
    command = str(Path(sys.executable).with_name("orchmem"))
    params = StdioServerParameters(command=command, args=["mcp", "--orch", orch, "--immediate"],
                                   env=settings_env(settings))
    seen = anyio.run(_session, params)
    assert set(seen["tools"]) == TOOLS
    for tool in seen["tools"].values():
        assert len(tool.description or "") > 60, tool.name
    assert "content" in seen["tools"]["remember"].input_schema["properties"]
    memory_id = seen["remember"]["memoryIds"][0]
    assert seen["recall"]["memories"][0]["memoryId"] == memory_id
    assert seen["recall"]["memories"][0]["content"] == "The user prefers answers in French"
    assert seen["supersede"]["superseded"] == memory_id
    assert seen["forget"]["forgotten"] == seen["supersede"]["supersededBy"]
    assert all(m["memoryId"] not in (memory_id, seen["forget"]["forgotten"])
               for m in seen["after"]["memories"])
    assert seen["unknown"].is_error
    assert "not_found" in seen["unknown"].content[0].text
    assert seen["foreign"].is_error and "scope_violation" in seen["foreign"].content[0].text
    assert seen["resource"].uri == "memory://bulletin"
    todo = next(m for m in seen["todo"]["memories"]
                if m["memoryId"] == seen["lower"]["memoryIds"][0])
    assert todo["type"] == "Todo"  # "todo" is matched in any case and stored as its name


async def _http_session(url: str, token: str) -> dict[str, Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    seen: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        seen["tools"] = {t.name for t in (await client.list_tools()).tools}
        seen["remember"] = (await client.call_tool("remember", {
            "content": "The user's favourite editor is Helix"})).structured_content
        seen["recall"] = (await client.call_tool("recall", {"query": "which editor?"})
                          ).structured_content
        seen["bad"] = await client.call_tool("recall", {"query": "editor", "top_n": 0})
    return seen


def test_mcp_over_http_needs_a_token_of_its_orchestrator(tmp_path: Path,
                                                          embedder: Embedder) -> None:
    settings = immediate_settings(tmp_path / "root")
    store = TokenStore(settings)
    for orch in ("alpha", "beta"):
        Workspace.for_orchestrator(settings, orch).ensure()
    alpha, _ = store.create("alpha")
    beta, _ = store.create("beta")
    app, guard = mcp_http_app(settings, "alpha", immediate=True, store=store)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.02)
        url = f"http://127.0.0.1:{port}/mcp"
        probe = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert httpx.post(url, json=probe).status_code == 401
        foreign = httpx.post(url, json=probe, headers={"Authorization": f"Bearer {beta}"})
        assert foreign.status_code == 403 and foreign.json()["error"] == "scope_violation"
        assert guard.counts.admitted == 0
        seen = anyio.run(_http_session, url, alpha)
    finally:
        server.should_exit = True
        thread.join(15)
    assert seen["tools"] == TOOLS
    memory_id = seen["remember"]["memoryIds"][0]
    assert seen["recall"]["memories"][0]["memoryId"] == memory_id
    assert seen["bad"].is_error
    assert seen["bad"].content[0].text.startswith("validation: top_n: "), seen["bad"].content


async def _time_session(params: StdioServerParameters) -> dict[str, Any]:
    async def recall(**arguments: Any) -> Any:
        return await client.call_tool("recall", {"query": "deploy target", **arguments})

    seen: dict[str, Any] = {}
    async with Client(params) as client:
        seen["schema"] = {t.name: t for t in (await client.list_tools()).tools
                          }["recall"].input_schema["properties"]
        seen["history"] = (await recall(include_inactive=True)).structured_content
        seen["latest"] = (await recall(include_inactive=True, latest=True)).structured_content
        seen["before"] = (await recall(as_of="2001-01-01T00:00:00Z")).structured_content
        seen["unknown"] = (await recall(known_at="2001-01-01T00:00:00Z")).structured_content
        seen["bad_known"] = await recall(known_at="last tuesday")
        seen["routed"] = (await recall(route=True)).structured_content
        seen["episodes"] = (await recall(episodes=True)).structured_content
        seen["bad"] = await recall(as_of="last tuesday")
        seen["future"] = await recall(as_of="2999-01-01T00:00:00Z")
    return seen


def test_mcp_recall_takes_as_of_latest_route_and_episodes_like_the_client(
        tmp_path: Path) -> None:
    from orchmem.worker import MemoryClient

    settings = immediate_settings(tmp_path / "root")
    orch = unique_id("mcp-time")
    memory = MemoryClient(orch, settings, immediate=True)
    with memory.run("move the deploy target") as run, run.step("decide") as step:
        step.prompt("Where does the deploy target go now?")
        first = step.write_back(memories=[{"type": "Decision",
                                           "content": "The deploy target is staging"}]).wait(30)
    old_id = first["memoryIds"][0]
    renewed = memory.supersede(old_id, content="The deploy target is production").wait(30)
    new_id = renewed["supersededBy"]
    local = memory.recall("deploy target", route=True, episodes=True)
    command = str(Path(sys.executable).with_name("orchmem"))
    params = StdioServerParameters(command=command, args=["mcp", "--orch", orch, "--immediate"],
                                   env=settings_env(settings))
    seen = anyio.run(_time_session, params)

    assert {"as_of", "known_at", "latest", "route", "episodes"} <= set(seen["schema"])
    assert seen["unknown"]["memories"] == []
    assert seen["unknown"]["plan"]["knownAt"] == "2001-01-01T00:00:00.000000Z"
    assert seen["bad_known"].is_error and "validation: known_at" in \
        seen["bad_known"].content[0].text
    assert {m["memoryId"] for m in seen["history"]["memories"]} == {old_id, new_id}
    assert [m["memoryId"] for m in seen["latest"]["memories"]] == [new_id]
    assert seen["latest"]["plan"]["latest"] is True
    assert seen["before"]["memories"] == []
    assert seen["before"]["plan"]["asOf"] == "2001-01-01T00:00:00.000000Z"
    assert seen["routed"]["plan"]["intent"] == local.plan["intent"]
    assert [m["memoryId"] for m in seen["routed"]["memories"]] == local.memory_ids
    assert [e["runId"] for e in seen["episodes"]["episodes"]] == [run.run_id]
    assert seen["episodes"]["episodes"][0]["memoryIds"] == \
        local.episodes[0]["memoryIds"]
    assert "episodes" not in seen["history"]
    for refused in (seen["bad"], seen["future"]):
        assert refused.is_error and "validation: as_of" in refused.content[0].text


async def _hostile_session(params: StdioServerParameters) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with Client(params) as client:
        stored = await client.call_tool("remember", {"content": "The deploy window is Friday"})
        memory_id = stored.structured_content["memoryIds"][0]
        seen["memory_id"] = memory_id
        seen["overflow"] = await client.call_tool("recall", {
            "query": "deploy window", "as_of": "0001-01-01T00:00:00+23:59"})
        seen["yes"] = await client.call_tool("forget", {"memory_id": memory_id, "hard": "yes"})
        seen["flag"] = await client.call_tool("recall", {"query": "deploy window",
                                                         "latest": 1})
        seen["after"] = (await client.call_tool("recall", {"query": "deploy window"})
                         ).structured_content
    return seen


def test_mcp_refuses_hostile_arguments_with_their_code(tmp_path: Path) -> None:
    settings = immediate_settings(tmp_path / "root")
    orch = unique_id("mcp-hostile")
    command = str(Path(sys.executable).with_name("orchmem"))
    params = StdioServerParameters(command=command, args=["mcp", "--orch", orch, "--immediate"],
                                   env=settings_env(settings))
    seen = anyio.run(_hostile_session, params)
    texts = {k: seen[k].content[0].text for k in ("overflow", "yes", "flag")}
    for key in texts:
        assert seen[key].is_error, key
    assert "validation: as_of:" in texts["overflow"], texts["overflow"]
    # the SDK checks the arguments' types itself, naming the argument
    assert "hard" in texts["yes"] and "valid boolean" in texts["yes"], texts["yes"]
    assert "latest" in texts["flag"] and "valid boolean" in texts["flag"], texts["flag"]
    # "hard": "yes" forgot nothing
    assert [m["memoryId"] for m in seen["after"]["memories"]] == [seen["memory_id"]]


async def _refusals(params: StdioServerParameters, made_up: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with Client(params) as client:
        seen["remember"] = (await client.call_tool("remember", {
            "content": "The user's desk is by the north window"})).structured_content
        calls: dict[str, tuple[str, dict[str, Any]]] = {
            "made_up": ("forget", {"memory_id": made_up}),
            "made_up_supersede": ("supersede", {"memory_id": made_up, "content": "Moved"}),
            "importance": ("remember", {"content": "A desk", "importance": 500}),
            "content": ("remember", {"content": 123}),
            "type": ("remember", {"content": "A desk", "type": "fact-ish"}),
            "missing": ("forget", {}),
            "top_n": ("recall", {"query": "desk", "top_n": "many"})}
        for name, (tool, arguments) in calls.items():
            result = await client.call_tool(tool, arguments)
            seen[name] = (result.is_error, result.content[0].text)
    return seen


def test_mcp_refusals_start_with_the_code_and_name_the_field(
        settings: Any, worker: Any) -> None:
    """Through a real worker: a made-up memoryId of this orchestrator is ``not_found``;
    a bad argument is ``validation: <argument>: …``, not the SDK's own wording."""
    from orchmem.models.core.shapes import derive_id

    orch = unique_id("mcp-refusals")
    command = str(Path(sys.executable).with_name("orchmem"))
    params = StdioServerParameters(command=command, args=["mcp", "--orch", orch],
                                   env=settings_env(settings))
    seen = anyio.run(_refusals, params, derive_id("m", orch, "never written"))
    assert seen["remember"]["memoryIds"]
    for name in ("made_up", "made_up_supersede"):
        failed, text = seen[name]
        assert failed and text.startswith("not_found: "), (name, text)
    for name, field in (("importance", "importance"), ("content", "content"),
                        ("type", "type"), ("missing", "memory_id"), ("top_n", "top_n")):
        failed, text = seen[name]
        assert failed and text.startswith(f"validation: {field}: "), (name, text)
        for wording in ("Error executing tool", "validation error for", "Arguments",
                        "pydantic"):
            assert wording not in text, (name, text)


#: More concurrent remembers than the threads of the SDK's pool for synchronous tools
#: (anyio's default limiter: 40).
BURST = 42


def _published(outbox: Path) -> int:
    if not outbox.exists():
        return 0
    kept = Outbox(outbox)
    try:
        return sum(e.published_at is not None for e in kept.entries())
    finally:
        kept.close()


async def _burst(params: StdioServerParameters, outbox: Path,
                 worker: WorkerProcess) -> dict[str, Any]:
    seen: dict[str, Any] = {"results": {}}

    async with Client(params) as client:
        async def remember(n: int) -> None:
            seen["results"][n] = await client.call_tool(
                "remember", {"content": f"Burst statement number {n}"})

        async with anyio.create_task_group() as group:
            for n in range(BURST):
                group.start_soon(remember, n)
            await anyio.to_thread.run_sync(functools.partial(
                wait_until, lambda: _published(outbox) == BURST, timeout=60,
                message="every remember published"))
            seen["recall"] = await client.call_tool("recall", {"query": "burst statement"})
            seen["answered_before_recall"] = len(seen["results"])
            await anyio.to_thread.run_sync(worker.start)
    return seen


def test_waiting_remembers_hold_no_thread_of_the_mcp_server(isolated: Any,
                                                            embedder: Embedder) -> None:
    # broker mode, no worker yet: every remember waits for one
    settings = isolated(shards=1, api={"wait_timeout_s": 120})
    orch = unique_id("mcp-burst")
    params = StdioServerParameters(command=str(Path(sys.executable).with_name("orchmem")),
                                   args=["mcp", "--orch", orch], env=settings_env(settings))
    worker = WorkerProcess(settings)
    try:
        outbox = Workspace.for_orchestrator(settings, orch).outbox_path
        seen = anyio.run(_burst, params, outbox, worker)
    finally:
        worker.stop()
    assert not seen["recall"].is_error, seen["recall"].content
    assert seen["answered_before_recall"] == 0
    results = seen["results"]
    assert len(results) == BURST
    assert all(not r.is_error and r.structured_content["memoryIds"] for r in results.values())
