"""``orchmem demo``: a scripted session through the reference orchestrator, traced.

It starts an embedded Redis and one worker for every shard under a fresh root, runs
two orchestrators over several channels, and prints what each message wrote, what it
recalled and why (ranks and scores), the bulletin, a contradiction kept, a preference
superseded and a cross-orchestrator request denied. The root is left for inspection.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchmem.config import Settings
from orchmem.examples import ReferenceOrchestrator, Reply
from orchmem.models.workspace.memlog import read_log
from orchmem.models.workspace.private import private_dir, write_private
from orchmem.worker.client.handles import WriteHandle, found_by
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.ops.tomlwrite import to_toml
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.broker import EmbeddedRedis

Echo = Callable[[str], None]

#: (orchestrator, channel, conversation, message)
SCRIPT: list[tuple[str, str, str, str]] = [
    ("acme-support", "slack", "c-101", "Hi! My name is Dana Reyes."),
    ("acme-support", "slack", "c-101", "I work as a support lead at Acme."),
    ("acme-support", "slack", "c-101", "I prefer short answers with bullet points."),
    ("acme-support", "email", "c-202", "Please plan the launch of the new help center for March."),
    ("acme-support", "slack", "c-101", "The deadline is Friday."),
    ("home-helper", "web", "w-1", "I live in Porto and I'm allergic to peanuts."),
    ("home-helper", "web", "w-1", "Remind me to renew my passport before June."),
    ("acme-support", "web", "c-303", "What did we decide about the help center launch?"),
    ("acme-support", "email", "c-202", "Actually, I prefer detailed answers with examples."),
]


class Trace:
    def __init__(self, echo: Echo) -> None:
        self.echo = echo

    def rule(self, title: str) -> None:
        self.echo("")
        self.echo(f"── {title} " + "─" * max(0, 76 - len(title)))

    def written(self, client: MemoryClient, label: str, handle: WriteHandle) -> None:
        result = handle.wait(30) or {}
        created = client.get(result.get("created", []))
        for node in created:
            self.echo(f"   wrote {label}: {node.type.value} {node.memory_id} "
                      f"\"{_short(node.content)}\" (importance {node.importance}, "
                      f"confidence {node.confidence:.2f})")
        for memory_id in result.get("reinforced", []):
            self.echo(f"   reinforced {memory_id}")
        for old in result.get("superseded", []):
            self.echo(f"   superseded {old} (status superseded, Updates edge from the new one)")
        for new, old in result.get("contradicted", []):
            self.echo(f"   contradiction kept: {new} Contradicts {old} (both stay active)")
        if not result.get("created") and not result.get("reinforced") and result:
            self.echo(f"   wrote {label}: nothing memorable")

    def recalled(self, reply: Reply) -> None:
        nodes = reply.selector.bundle.nodes
        if not nodes:
            self.echo("   recalled: nothing relevant")
        for item in nodes[:3]:
            s = item.scores
            self.echo(f"   recalled #{item.rank} {item.memory.type.value} "
                      f"\"{_short(item.memory.content, 60)}\" score {s.score:.4f} "
                      f"({found_by(s)}, importance x{s.importance:.2f})")


def _short(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def run_demo(settings: Settings, echo: Echo = print) -> int:
    """Run the scripted session under ``settings.root``; returns an exit code."""
    started = time.monotonic()
    trace = Trace(echo)
    echo(f"orchmem demo: root {settings.root}")
    broker = EmbeddedRedis.start(settings)
    worker: subprocess.Popen[bytes] | None = None
    try:
        config = settings.root / "orchmem.toml"
        write_private(config, to_toml(settings.model_copy(update={"broker_url": broker.url}),
                                      exclude_defaults=True))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
        env["ORCHMEM_CONFIG"] = str(config)
        log = (settings.root / "logs").resolve()
        private_dir(log)
        worker = subprocess.Popen(
            [sys.executable, "-m", "orchmem.worker", "worker", "--logfile",
             str(log / "worker.log")], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT, start_new_session=True)
        live = settings.model_copy(update={"broker_url": broker.url})
        app = create_app(live)
        echo(f"   embedded Redis on 127.0.0.1:{broker.port}; starting a worker "
             "(loading the embedding model)…")
        _wait_for_worker(app, worker)
        clients = {o: MemoryClient(o, live, app=app) for o in ("acme-support", "home-helper")}
        for client in clients.values():  # the worker child is ready once it has answered
            client.bulletin(timeout=120)
        echo(f"   worker ready after {time.monotonic() - started:.1f}s")
        bots = {o: ReferenceOrchestrator(c) for o, c in clients.items()}
        _script(trace, clients, bots)
        _contradiction(trace, clients["acme-support"])
        _diagnostics(trace, bots["acme-support"])
        _denied(trace, clients)
        trace.rule("acme-support: the bulletin sent with the next message")
        final = clients["acme-support"].bulletin()
        for line in final.text.splitlines():
            echo(f"   {line}")
        trace.rule("done")
        echo(f"   {time.monotonic() - started:.1f}s. Everything is kept under {settings.root}:")
        echo(f"   orchmem --root {settings.root} list --orch acme-support")
        echo(f"   orchmem --root {settings.root} recall --orch acme-support \"help center\"")
        echo(f"   {settings.root}/orchestrators/acme-support/memory/"
             "(memory.db, logs/memory.log, bulletins/latest.md)")
        return 0
    finally:
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        broker.stop()


def _wait_for_worker(app: Any, worker: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"the demo worker exited with {worker.returncode}")
        if app.control.ping(timeout=0.5):
            return
    raise RuntimeError("the demo worker did not start within 180s")


def _script(trace: Trace, clients: dict[str, MemoryClient],
            bots: dict[str, ReferenceOrchestrator]) -> None:
    for orchestrator_id, channel, conversation, text in SCRIPT:
        trace.rule(f"{orchestrator_id} · {channel} · {conversation}")
        trace.echo(f"   user: {text}")
        reply = bots[orchestrator_id].handle_message(channel, conversation, text)
        client = clients[orchestrator_id]
        trace.written(client, "transcript", reply.transcript)
        sections = reply.bulletin.bulletin["sections"].values()
        cited = {m for lines in sections for line in lines for m in line["memoryIds"]}
        trace.echo(f"   bulletin ({reply.bulletin.source}, "
                   f"{reply.bulletin.bulletin.get('chars', 0)} chars) cites {len(cited)} memories")
        trace.recalled(reply)
        trace.echo(f"   workflow: {reply.workflow}")
        for step in reply.steps:
            trace.written(client, f"step {step.step_id}", step.written)
        trace.echo(f"   reply: {_short(reply.text, 100)}")


def _contradiction(trace: Trace, client: MemoryClient) -> None:
    trace.rule("acme-support · a calendar sync step reports another deadline")
    handle = client.write_back(workflow_output={
        "workflowRunId": "sync-1", "stepId": "calendar",
        "output": {"facts": ["The deadline is Monday"]}})
    trace.written(client, "step calendar", handle)
    trace.echo("   (inferred by a workflow, so it does not override the user: both are kept, "
               "and recall ranks the older claim lower while the conflict stands)")


def _diagnostics(trace: Trace, bot: ReferenceOrchestrator) -> None:
    trace.rule("acme-support · diagnostics: why are tickets piling up?")
    report = bot.diagnose("why are support tickets piling up", [
        {"severity": "error", "component": "queue", "text": "Support ticket queue backlog at 340"},
        {"severity": "warning", "component": "staffing", "text": "Two support agents on leave"}])
    trace.written(bot.client, "diagnostics", report.written)
    trace.echo("   evidence (bounded, with provenance):")
    for line in report.evidence.text.split("[memories relevant to this diagnostics]")[-1] \
            .strip().splitlines()[:8]:
        trace.echo(f"     {line}")


def _denied(trace: Trace, clients: dict[str, MemoryClient]) -> None:
    trace.rule("home-helper asks for acme-support's memory")
    # The client also logs the denial as a WARNING; the trace shows it once, below.
    client_log = logging.getLogger("orchmem.worker.client.memory_client")
    level = client_log.level
    client_log.setLevel(logging.ERROR)
    try:
        bundle = clients["home-helper"].recall("Dana", orchestrator_id="acme-support")
    finally:
        client_log.setLevel(level)
    trace.echo(f"   denied: {len(bundle.nodes)} memories returned; {bundle.warnings[0]}")
    log = read_log(clients["home-helper"].databases.workspace("home-helper").log_path)
    denial = next(r for r in reversed(log) if r["event"] == "scope_denied")
    trace.echo(f"   logged in home-helper's memory.log: {denial['event']} at {denial['at']}")


def prepare_root(root: Path, fresh: bool) -> None:
    """Refuse to reuse a non-empty demo root unless ``fresh`` (which empties it)."""
    if root.exists() and any(root.iterdir()):
        if not fresh:
            raise FileExistsError(f"{root} is not empty: pass --fresh to start over, "
                                  "or --root to use another folder")
        shutil.rmtree(root)
    private_dir(root)
