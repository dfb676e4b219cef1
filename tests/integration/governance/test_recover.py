"""``recover``: a soft-forgotten memory comes back, audited with actor and reason, through
the real worker (client and CLI), HTTP and MCP; a hard-forgotten one is refused with the
code ``erased``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
from api_testing import immediate_settings, start_api
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from orchmem_testing import WorkerProcess, settings_env, unique_id

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.history import history
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.worker import MemoryClient
from orchmem.worker.cli.main import main

BASE = "/v1/orchestrators"


def _events(client: MemoryClient, memory_id: str) -> list[dict[str, Any]]:
    odb = client.databases.open(client.orchestrator_id, create=False)
    assert odb is not None
    return list(history(odb, memory_id, EVERYTHING, purpose="test oracle")["events"])


def _cli(settings: Settings, *args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(main, [*args, "--json"], env=settings_env(settings))
    return result.exit_code, json.loads(result.output)


def test_a_soft_forget_is_recovered_and_a_hard_one_is_refused_through_the_worker(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    kept = client.write_back(memories=[{"type": "Fact", "content": "The vault code rotates "
                                        "every Friday"}]).wait(60)["memoryIds"][0]
    erased = client.write_back(memories=[{"type": "Fact", "content": "The lobby plant is a "
                                          "ficus"}]).wait(60)["memoryIds"][0]
    assert client.forget(kept).wait(60)["ok"]
    assert kept not in {n.memory.memory_id for n in client.recall("vault code").nodes}
    done = client.recover(kept, reason="forgotten by mistake").wait(60)
    assert done["ok"] and done["memoryIds"] == [kept], done
    assert client.get([kept])[0].status.value == "active"
    assert kept in {n.memory.memory_id for n in client.recall("vault code").nodes}
    event = _events(client, kept)[-1]
    assert (event["op"], event["actor"], event["reason"]) == (
        "recover", "user", "forgotten by mistake")
    assert event["after"]["status"] == "active"
    again = client.recover(kept).wait(60)  # active now: nothing to recover
    assert again["ok"] is False and again["error"] == "validation", again
    # the same forget and recover again (the same payloads, so the same keys): each is a
    # new request once the memory went back, not the first one's receipt
    assert client.forget(kept).wait(60)["duplicate"] is False
    assert client.get([kept], view=EVERYTHING, purpose="test oracle")[0].status.value == \
        "retracted"
    assert client.recover(kept).wait(60)["ok"]  # refused before, applies now
    assert client.get([kept])[0].status.value == "active"
    assert client.recover(kept).wait(60)["duplicate"] is True  # nothing changed since

    # the CLI: soft forget, recover; then a hard forget cannot be recovered
    assert client.forget(erased).wait(60)["ok"]
    code, out = _cli(settings, "recover", "--orch", orch_id, erased, "--reason", "asked")
    assert code == 0 and out["memoryIds"] == [erased], out
    assert client.forget(erased, hard=True).wait(60)["ok"]
    code, out = _cli(settings, "recover", "--orch", orch_id, erased)
    assert code != 0 and out["error"] == "erased", out
    refused = client.recover(erased).wait(60)
    assert refused["ok"] is False and refused["error"] == "erased", refused
    assert client.get([erased], view=EVERYTHING, purpose="test oracle") == []


def test_recover_over_http_and_mcp(tmp_path: Path, embedder: Embedder) -> None:
    orch = unique_id("recover")
    settings = immediate_settings(tmp_path / "root")
    api = start_api(settings, [orch])
    try:
        with httpx.Client(base_url=api.url, timeout=60, headers=api.auth(orch)) as http:
            def write(content: str) -> str:
                reply = http.post(f"{BASE}/{orch}/writeback", json={"memories": [{
                    "type": "Fact", "content": content}]}).json()
                return str(reply["result"]["memoryIds"][0])

            soft, hard = write("The night bus leaves at two"), write("The gate code is 4411")
            assert http.post(f"{BASE}/{orch}/forget", json={"memoryId": soft}).is_success
            back = http.post(f"{BASE}/{orch}/recover", json={"memoryId": soft,
                                                             "reason": "wrongly forgotten"})
            assert back.status_code == 200 and back.json()["result"]["memoryIds"] == [soft]
            assert http.post(f"{BASE}/{orch}/forget",
                             json={"memoryId": hard, "hard": True}).is_success
            gone = http.post(f"{BASE}/{orch}/recover", json={"memoryId": hard})
            assert gone.status_code == 410 and gone.json()["error"] == "erased", gone.text
    finally:
        api.stop()
    seen = anyio.run(_mcp_session, settings, orch, soft, hard)
    assert "recover" in seen["tools"]
    assert seen["recovered"] == {"recovered": soft}
    assert seen["erased"].is_error and "erased: " in seen["erased"].content[0].text


async def _mcp_session(settings: Settings, orch: str, soft: str, hard: str) -> dict[str, Any]:
    command = str(Path(sys.executable).with_name("orchmem"))
    params = StdioServerParameters(command=command, args=["mcp", "--orch", orch, "--immediate"],
                                   env=settings_env(settings))
    seen: dict[str, Any] = {}
    async with Client(params) as client:
        seen["tools"] = {t.name for t in (await client.list_tools()).tools}
        assert not (await client.call_tool("forget", {"memory_id": soft,
                                                      "reason": "over MCP"})).is_error
        back = await client.call_tool("recover", {"memory_id": soft, "reason": "asked back"})
        assert not back.is_error, back.content
        seen["recovered"] = back.structured_content
        seen["erased"] = await client.call_tool("recover", {"memory_id": hard})
    return seen
