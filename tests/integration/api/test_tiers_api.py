"""Filtering by tier over HTTP and MCP: ``?tier=`` keeps those tiers, an unknown tier
is a 422 naming the field (and a tool error over MCP)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from api_testing import immediate_settings, start_api
from mcp.server.mcpserver.exceptions import ToolError

from orchmem.models.embedding.embedders import Embedder
from orchmem.worker import MemoryClient
from orchmem.worker.mcp.server import MemoryTools, coded

BASE = "/v1/orchestrators"
ORCH = "tier-api"


def test_tiers_over_http_and_mcp(tmp_path: Path, embedder: Embedder) -> None:
    settings = immediate_settings(tmp_path / "root")
    api = start_api(settings, [ORCH])
    try:
        with httpx.Client(base_url=api.url, timeout=60, headers=api.auth(ORCH)) as http:
            reply = http.post(f"{BASE}/{ORCH}/writeback", json={"memories": [
                {"type": "Fact", "content": "The harbor crane is inspected monthly"},
                {"type": "Fact", "content": "Check the harbor crane log before lifting",
                 "tier": "procedural"}]}).json()
            semantic, procedural = reply["result"]["memoryIds"]

            def recalled(*tiers: str) -> list[str]:
                got = http.get(f"{BASE}/{ORCH}/recall",
                               params=[("q", "harbor crane"), *(("tier", t) for t in tiers)])
                assert got.status_code == 200, got.text
                return [n["memory"]["memoryId"] for n in got.json()["nodes"]]

            assert set(recalled()) == {semantic, procedural}
            assert recalled("procedural") == [procedural]
            assert recalled("semantic") == [semantic]
            bad = http.get(f"{BASE}/{ORCH}/recall", params={"q": "harbor", "tier": "habit"})
            assert bad.status_code == 422 and "tiers" in bad.text and "habit" in bad.text
            bad = http.get(f"{BASE}/{ORCH}/recall", params={"q": "harbor", "runId": ""})
            assert bad.status_code == 422 and "runId" in bad.text
    finally:
        api.stop()
    tools = MemoryTools(MemoryClient(ORCH, settings, immediate=True), 30)
    recall = coded(tools.recall)
    found = recall(query="harbor crane", tiers=["procedural"])
    assert [m["memoryId"] for m in found["memories"]] == [procedural]
    with pytest.raises(ToolError, match="validation: tiers: 'habit' is not a tier"):
        recall(query="harbor crane", tiers=["habit"])
