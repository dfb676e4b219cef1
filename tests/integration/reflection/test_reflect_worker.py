"""Reflection through the real worker: beat's fan-out publishes ``reflect`` only where
memory changed, the review is a queued write, and the CLI lists topics and proposals."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner
from orchmem_testing import settings_env, wait_until

from orchmem.tasks.maintenance import FANOUT
from orchmem.worker import MemoryClient
from orchmem.worker.cli.main import main
from orchmem.worker.runtime.shards import shard_for


def memory(content: str, at: str) -> dict[str, Any]:
    return {"type": "Fact", "content": content, "createdAt": at,
            "source": {"sourceType": "manual", "capturedBy": "extractor"}}


def fanout(app: Any, shard: int) -> list[str]:
    return list(app.send_task(FANOUT, kwargs={"shard": shard, "job": "reflect"})
                .get(timeout=60)["published"])


def cli(settings: Any, *args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--json"], env=settings_env(settings),
                                prog_name="orchmem")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_beat_reflects_where_memory_changed_and_a_review_goes_through_the_queue(
        settings: Any, app: Any, worker: Any, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings, app=app)
    written = client.write_back(memories=[
        memory("The billing service runs on port 8080", "2026-01-01T00:00:00Z"),
        memory("The billing service now runs on port 9090", "2026-02-01T00:00:00Z")]).wait(60)
    assert written is not None and written["ok"]
    old, new = written["memoryIds"]
    shard = shard_for(settings, orch_id)
    working = client.databases.workspace(orch_id).bulletins_dir / "working.md"

    assert orch_id in fanout(app, shard)
    wait_until(lambda: working.exists() and client.proposals(), 60,
               message="the scheduled reflection")
    wait_until(lambda: orch_id not in fanout(app, shard), 30, message="reflection settled")

    [proposal] = cli(settings, "review", "list", "--orch", orch_id)["proposals"]
    assert (proposal["relation"], proposal["newerId"], proposal["olderId"]) == \
        ("replaces", new, old)
    topics = cli(settings, "topics", "--orch", orch_id)["topics"]
    assert [t["memories"] for t in topics] == [2]
    accepted = cli(settings, "review", "accept", "--orch", orch_id, proposal["proposalId"])
    assert accepted["superseded"] == [old]
    assert [m.status.value for m in client.get([old, new])] == ["superseded", "active"]
    result = CliRunner().invoke(main, ["review", "reject", "--orch", orch_id,
                                       proposal["proposalId"], "--json"],
                                env=settings_env(settings), prog_name="orchmem")
    assert result.exit_code != 0 and "already accepted" in result.output

    assert orch_id in fanout(app, shard)  # the review changed memory
    wait_until(lambda: "evolves pending" not in working.read_text(), 60,
               message="working.md after the review")
    stats = cli(settings, "stats", "--orch", orch_id)["reflection"]
    assert stats["proposals"] == {"accepted": 1} and stats["lastReflectAt"]
    ran = cli(settings, "reflect", "--orch", orch_id, "--wait")
    assert ran["ok"] and ran["units"] == 1 and ran["proposals"] == 0
