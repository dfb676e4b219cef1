"""Governance over HTTP: scoped recall, bulletin and context; bad scope ids
and budgets named; restricted memories never served."""

from __future__ import annotations

from pathlib import Path

import httpx
from api_testing import immediate_settings, start_api

from orchmem.models.embedding.embedders import Embedder

BASE = "/v1/orchestrators"
ORCH = "gov-api"


def test_scoped_reads_over_http(tmp_path: Path, embedder: Embedder) -> None:
    api = start_api(immediate_settings(tmp_path / "root"), [ORCH])
    try:
        with httpx.Client(base_url=api.url, timeout=60, headers=api.auth(ORCH)) as http:
            def write(content: str, **fields: object) -> str:
                reply = http.post(f"{BASE}/{ORCH}/writeback", json={"memories": [{
                    "type": "Fact", "content": content, **fields}]}).json()
                return str(reply["result"]["memoryIds"][0])

            shared = write("The harbor office opens at eight")
            mine = write("The harbor badge of Alma is blue", scope="session",
                         sessionId="s-a")
            theirs = write("The harbor badge of Bruno is red", scope="session",
                           sessionId="s-b")
            secret = write("The harbor alarm password is Osprey-5521")

            def recalled(**params: str) -> set[str]:
                reply = http.get(f"{BASE}/{ORCH}/recall", params={"q": "harbor", **params})
                assert reply.status_code == 200, reply.text
                return {n["memory"]["memoryId"] for n in reply.json()["nodes"]}

            assert recalled() == {shared}
            assert recalled(sessionId="s-a") == {shared, mine}
            assert theirs not in recalled(sessionId="s-a") and secret not in recalled()
            bulletin = http.get(f"{BASE}/{ORCH}/bulletin", params={"sessionId": "s-b"}).json()
            assert theirs in bulletin["text"] and mine not in bulletin["text"]
            context = http.post(f"{BASE}/{ORCH}/context", json={
                "purpose": "step", "query": "harbor badge", "sessionId": "s-a",
                "format": "relevant-memory", "maxTokens": 40}).json()
            assert context["text"].startswith("[Relevant Memory]")
            assert theirs not in context["memoryIds"] and secret not in context["memoryIds"]
            bad = http.post(f"{BASE}/{ORCH}/context", json={
                "purpose": "step", "query": "x", "maxChars": 0})
            assert bad.status_code == 422 and "maxChars" in bad.text
            bad = http.get(f"{BASE}/{ORCH}/recall", params={"q": "x", "sessionId": ""})
            assert bad.status_code == 422 and "sessionId" in bad.text
    finally:
        api.stop()
