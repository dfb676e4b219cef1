"""Filtering by tier through the real worker: recall, list, forget by policy and
export select the tiers asked for; an unknown tier is refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from orchmem_testing import WorkerProcess, settings_env

from orchmem.config import MemoryValidationError, Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.worker import MemoryClient
from orchmem.worker.cli.main import main

SOURCE = {"sourceType": "manual", "capturedBy": "user"}


def cli(settings: Settings, *args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(main, [*args, "--json"], env=settings_env(settings))
    assert result.exit_code == code, result.output
    return json.loads(result.output) if code == 0 else result.output


def _tiered(client: MemoryClient) -> dict[str, str]:
    """One deploy memory per tier (the procedural one named explicitly), and a
    session-scoped episodic one; tier -> memoryId (``session`` for the last)."""
    written = client.write_back(memories=[
        {"type": "Preference", "content": "The user likes deploys announced in chat",
         "source": SOURCE},
        {"type": "Fact", "content": "The deploy pipeline runs on the blue cluster",
         "source": SOURCE},
        {"type": "Event", "content": "The deploy on Tuesday failed on a migration",
         "source": SOURCE},
        {"type": "Fact", "content": "Always run the deploy checklist before a release",
         "tier": "procedural", "source": SOURCE},
        {"type": "Event", "content": "The deploy in this session was rolled back",
         "scope": "session", "sessionId": "s-tier", "source": SOURCE},
    ]).wait(60)
    assert written is not None and written["ok"], written
    names = ("profile", "semantic", "episodic", "procedural", "session")
    return dict(zip(names, written["memoryIds"], strict=True))


def test_recall_list_forget_and_export_keep_the_tiers_asked_for(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str,
        tmp_path: Path) -> None:
    client = MemoryClient(orch_id, settings)
    ids = _tiered(client)
    everything = set(client.recall("deploy", top_n=20).memory_ids)
    assert everything == {ids["profile"], ids["semantic"], ids["episodic"], ids["procedural"]}
    assert client.recall("deploy", tiers=["procedural"]).memory_ids == [ids["procedural"]]
    assert set(client.recall("deploy", tiers=["profile", "semantic"]).memory_ids) == {
        ids["profile"], ids["semantic"]}
    assert set(client.recall("deploy", tiers=["episodic"], session_id="s-tier").memory_ids) \
        == {ids["episodic"], ids["session"]}
    with pytest.raises(MemoryValidationError, match="tiers: 'habit' is not a tier"):
        client.recall("deploy", tiers=["habit"])
    listed = cli(settings, "list", "--orch", orch_id, "--tier", "episodic", "--tier",
                 "procedural")
    assert {m["memoryId"] for m in listed["memories"]} == {ids["episodic"], ids["procedural"]}
    assert all(m["tier"] in ("episodic", "procedural") for m in listed["memories"])
    recalled = cli(settings, "recall", "--orch", orch_id, "deploy", "--tier", "profile",
                   "--local")
    assert [n["memory"]["memoryId"] for n in recalled["nodes"]] == [ids["profile"]]
    assert "habit" in cli(settings, "recall", "--orch", orch_id, "x", "--tier", "habit",
                          code=2)
    out = tmp_path / "export"
    manifest = cli(settings, "export", "--orch", orch_id, "--out", str(out), "--tier",
                   "procedural")
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["memoryId"] for r in records] == [ids["procedural"]]
    assert manifest["tiers"] == ["procedural"] and manifest["other_tiers_left_out"] == 4
    # forget by policy: every session-scoped memory, and every episodic one
    session = cli(settings, "forget", "--orch", orch_id, "--scope", "session", "--dry-run")
    assert session["memoryIds"] == [ids["session"]]
    dry = client.forget_where(tiers=["episodic"], dry_run=True).wait(60)
    assert dry is not None and set(dry["memoryIds"]) == {ids["episodic"], ids["session"]}
    done = cli(settings, "forget", "--orch", orch_id, "--tier", "episodic")
    assert set(done["memoryIds"]) == {ids["episodic"], ids["session"]}
    assert ids["episodic"] not in client.recall("deploy", top_n=20).memory_ids
    refused = client.forget_where(tiers=["habit"])  # refused before it is published
    assert not refused.ok and refused.error == "validation"
    assert "tiers.0" in str(refused.message)
    assert "'habit'" in str(refused.message)
