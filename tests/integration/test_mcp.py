"""A real MCP client session (the SDK's client over stdio) launching ``orchmem mcp``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from api_testing import immediate_settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from orchmem_testing import settings_env, unique_id

FOREIGN = "m-00000000-0000000000000000"
TOOLS = {"remember", "recall", "bulletin", "forget", "supersede"}


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
