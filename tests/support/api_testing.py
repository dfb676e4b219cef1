"""Test support for the HTTP API: the real app served by uvicorn on a free port, in a
thread of the test process (so a test can read the server's admission counters)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from orchmem_testing import free_port, make_settings

from orchmem.config import Settings
from orchmem.models.workspace.folders import Workspace
from orchmem.worker.api.app import create_api
from orchmem.worker.api.auth import Admissions
from orchmem.worker.api.server import server_config
from orchmem.worker.api.tokens import TokenStore


@dataclass
class ApiServer:
    url: str
    settings: Settings
    app: FastAPI
    tokens: dict[str, str]
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def counts(self) -> Admissions:
        counts: Admissions = self.app.state.orchmem.guard.counts
        return counts

    def auth(self, orchestrator_id: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[orchestrator_id]}"}

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


def immediate_settings(root: Path, **overrides: object) -> Settings:
    """Settings whose server runs the tasks in process; the broker URL leads nowhere."""
    return make_settings(root, f"redis://127.0.0.1:{free_port()}/0",
                         api={"immediate": True, "wait_timeout_s": 30}, **overrides)


def start_api(settings: Settings, orchestrators: list[str]) -> ApiServer:
    """Create each orchestrator's folder and one token for it, then serve the API."""
    store = TokenStore(settings)
    tokens = {}
    for orchestrator_id in orchestrators:
        Workspace.for_orchestrator(settings, orchestrator_id).ensure()
        tokens[orchestrator_id] = store.create(orchestrator_id)[0]
    app = create_api(settings, store)
    port = free_port()
    server = uvicorn.Server(server_config(app, settings, host="127.0.0.1", port=port,
                                          log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="orchmem-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the API server did not start")
        time.sleep(0.02)
    return ApiServer(f"http://127.0.0.1:{port}", settings, app, tokens, server, thread)
