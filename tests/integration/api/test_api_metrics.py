"""``orchmem serve --metrics-port``: the HTTP API's own Prometheus endpoint, scraped from
a real server process after a write, a recall and a context block over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from orchmem_testing import free_port, make_settings, settings_env, unique_id, wait_until

from orchmem.config import Settings
from orchmem.models.storage.db.database import Databases

ORCH = unique_id("served-metrics")
SECRET = "The deploy window is Thursday after the standup"


def _orchmem(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchmem.worker", *args], check=True,
                          env=settings_env(settings), capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    settings = make_settings(tmp_path / "root", "redis://127.0.0.1:1/0")
    Databases(settings).open(ORCH)  # a token names an orchestrator that exists
    token = _orchmem(settings, "token", "create", "--orch", ORCH).stdout.strip()
    port, metrics = free_port(), free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "orchmem.worker", "serve", "--immediate", "--port", str(port),
         "--metrics-port", str(metrics)], env=settings_env(settings),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{base}/health"), timeout=120, message="the API")
        yield base, f"http://127.0.0.1:{metrics}/metrics", token
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


def test_serve_metrics_port_serves_its_recalls_and_context_blocks(
        served: tuple[str, str, str]) -> None:
    base, metrics, token = served
    auth = {"Authorization": f"Bearer {token}"}
    orch = f"{base}/v1/orchestrators/{ORCH}"
    wrote = httpx.post(f"{orch}/writeback", headers=auth, timeout=120, json={"memories": [
        {"type": "Decision", "content": SECRET,
         "source": {"sourceType": "manual", "capturedBy": "user"}}]})
    assert wrote.status_code == 200, wrote.text
    assert httpx.get(f"{orch}/recall", headers=auth, params={"q": "deploy window"},
                     timeout=60).status_code == 200
    block = httpx.post(f"{orch}/context", headers=auth, timeout=60,
                       json={"purpose": "step", "query": "when do we deploy?", "maxChars": 2000})
    assert block.status_code == 200, block.text

    text = httpx.get(metrics, timeout=10).text
    assert "orchmem_recall_duration_count" in text
    assert 'orchmem_context_budget_use_count{context_budget_unit="chars",' \
           'context_purpose="step"}' in text
    assert "Thursday" not in text and "deploy" not in text  # counts and labels, no content
