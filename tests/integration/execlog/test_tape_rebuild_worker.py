"""Memories written from a run's steps come back from the execution log through the
real worker: client → Redis → Celery → SQLite, the memory rows lost, then ``orchmem
rebuild --from-log`` gives the same ids, texts, tiers, statuses and links, forgotten
ones still forgotten."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from click.testing import CliRunner

from orchmem.config import Settings
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.execlog.entries import event_by_id, read_log
from orchmem.models.storage.memories import portable
from orchmem.worker import MemoryClient
from orchmem.worker.cli import main
from orchmem.worker.runtime.app import OrchmemCelery

pytestmark = pytest.mark.usefixtures("worker")
TIMEOUT = 60
#: A word only the hard-forgotten memory and its edge's reason say.
SECRET = "zanzibarite"


def cli(settings: Settings, *args: str) -> Any:
    return CliRunner().invoke(main, ["--root", str(settings.root), *args])


def ok(handle: Any) -> dict[str, Any]:
    done = handle.wait(TIMEOUT)
    assert done is not None and done["ok"], done
    return dict(done)


def written_run(memory: MemoryClient) -> tuple[Any, dict[str, str]]:
    """A run whose two steps write five memories (two linked), then a supersede, a
    soft forget and a hard forget; returns (run, {name: memoryId})."""
    with memory.run("plan the bakery launch", conversation_id="c-tape") as run:
        with run.step("decide") as step:
            step.prompt("What do we bake for the launch?", actor="planner")
            first = ok(step.write_back(memories=[
                {"type": "Decision", "content": "We bake sourdough for the launch",
                 "key": "bake"},
                {"type": "Fact", "content": "The oven holds twelve loaves", "key": "oven",
                 "tier": "semantic"},
                {"type": "Preference", "content": "Maya prefers rye over spelt",
                 "key": "rye", "tier": "profile"},
                {"type": "Fact", "content": f"The {SECRET} supplier delivers flour",
                 "key": "secret"}],
                edges=[{"fromMemoryId": "bake", "toMemoryId": "oven",
                        "edgeType": "RelatedTo", "reason": "the oven bounds the batch"},
                       {"fromMemoryId": "bake", "toMemoryId": "secret",
                        "edgeType": "CausedBy", "reason": f"{SECRET} flour"}]))
        with run.step("revise") as step:
            second = ok(step.write_back(memories=[
                {"type": "Decision", "content": "We bake rye sourdough for the launch"}]))
        run.outcome("ok", "The launch menu is set.")
    assert all(r and r["ok"] for r in run.wait(TIMEOUT))
    bake, oven, rye, secret = first["memoryIds"]
    ids = {"bake": bake, "oven": oven, "rye": rye, "secret": secret,
           "rye-bake": second["memoryIds"][0]}
    ok(memory.supersede(bake, by=ids["rye-bake"], reason="the menu changed"))
    ok(memory.forget(rye, reason="asked to"))
    ok(memory.forget(secret, hard=True, reason="asked to"))
    assert memory.wait_for_writes(TIMEOUT) == []
    return run, ids


def stored(settings: Settings, orch_id: str) -> dict[str, Any]:
    """Records (export lines), sources and edges of the orchestrator, read fresh."""
    databases = Databases(settings, readonly=True)
    odb = databases.open(orch_id, create=False)
    assert odb is not None
    try:
        with odb.read():
            return {kind: sorted(portable.rows(odb, kind), key=json.dumps)
                    for kind in ("records", "sources", "edges")}
    finally:
        databases.close_all()


def db_path(settings: Settings, orch_id: str) -> Any:
    return Databases(settings, readonly=True).workspace(orch_id).db_path


def lose_the_store(settings: Settings, orch_id: str) -> None:
    """What a lost derived store leaves: the log, no memory rows."""
    path = db_path(settings, orch_id)
    with sqlite3.connect(path, timeout=30) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        for table in ("memory_edges", "memory_sources", "memory_embeddings", "memories"):
            conn.execute(f"DELETE FROM {table}")
    conn.close()


def sql(settings: Settings, orch_id: str, query: str) -> list[tuple[Any, ...]]:
    path = db_path(settings, orch_id)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def test_memories_lost_come_back_from_the_log_with_the_same_ids_and_states(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    _, ids = written_run(memory)
    before = stored(settings, orch_id)
    assert len(before["records"]) == 5 and len(before["edges"]) == 3
    vectors = sql(settings, orch_id, "SELECT count(*) FROM memory_embeddings")[0][0]
    assert vectors == 4  # every memory but the erased one
    question = "how many loaves does the oven hold"
    assert memory.recall(question).memory_ids[:1] == [ids["oven"]]
    lose_the_store(settings, orch_id)
    assert stored(settings, orch_id)["records"] == []

    dry = cli(settings, "rebuild", "--from-log", "--orch", orch_id, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.output)
    assert planned["dryRun"] and planned["written"]["records"] == 5
    assert planned["written"]["tombstones"] == 1 and planned["erased"] == 0
    assert stored(settings, orch_id)["records"] == []  # a dry run writes nothing

    done = cli(settings, "rebuild", "--from-log", "--orch", orch_id, "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["written"] == {"records": 5, "sources": 4, "edges": 3, "tombstones": 1}
    assert report["vectors"] == vectors
    after = stored(settings, orch_id)
    assert after == before  # same ids, texts, tiers, statuses, validity, sources, links
    by_id = {r["memoryId"]: r for r in after["records"]}
    assert by_id[ids["bake"]]["status"] == "superseded"
    assert by_id[ids["rye"]]["status"] == "retracted"  # soft-forgotten: not active again
    assert by_id[ids["secret"]]["forgotten"] == 1 and by_id[ids["secret"]]["content"] == ""
    assert by_id[ids["rye"]]["tier"] == "profile"
    # the full-text index and the vectors are derived again
    found = sql(settings, orch_id, "SELECT m.memory_id FROM memory_fts JOIN memories AS m "
                "ON m.id = memory_fts.rowid WHERE memory_fts MATCH 'twelve'")
    assert found == [(ids["oven"],)]
    assert sql(settings, orch_id, "SELECT count(*) FROM memory_embeddings")[0][0] == vectors
    # the client that recalled before the loss recalls from the rebuilt rows
    assert memory.recall(question).memory_ids[:1] == [ids["oven"]]

    again = cli(settings, "rebuild", "--from-log", "--orch", orch_id, "--json")
    assert again.exit_code == 0, again.output
    second = json.loads(again.output)
    assert second["written"]["records"] == 0 and second["verified"] == 5  # idempotent


def test_a_hard_forget_erases_the_snapshots_and_readers_never_see_one(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    run, ids = written_run(memory)
    quoting = sql(settings, orch_id, "SELECT seq, kind, status FROM log_events WHERE "
                  f"text LIKE '%{SECRET}%' OR data LIKE '%{SECRET}%'")
    assert quoting == []  # its snapshots, and its edge's reason in the neighbour's
    snapshots = sql(settings, orch_id, "SELECT status, data FROM log_events WHERE "
                    f"kind = 'memory_stored' AND name = '{ids['secret']}' ORDER BY seq")
    assert [s for s, _ in snapshots] == ["create", "forget_hard"]
    assert all("$redacted" in json.loads(d) for _, d in snapshots[:-1])
    tombstone = json.loads(snapshots[-1][1])["record"]
    assert tombstone["forgotten"] == 1 and tombstone["content"] == ""
    # the run's story has no snapshot; an event read by id shows the memoryId only
    databases = Databases(settings, readonly=True)
    odb = databases.open(orch_id, create=False)
    assert odb is not None
    try:
        events, _ = read_log(odb, run_id=run.run_id, limit=1000)
        assert "memory_stored" not in {e["kind"] for e in events}
        [(event_id,)] = sql(settings, orch_id, "SELECT event_id FROM log_events WHERE "
                            f"kind = 'memory_stored' AND name = '{ids['oven']}' LIMIT 1")
        shown = event_by_id(odb, event_id)
        assert shown is not None and shown["name"] == ids["oven"] and "data" not in shown
    finally:
        databases.close_all()


def test_a_rebuild_refuses_a_conflict_and_an_unknown_orchestrator(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    memory = MemoryClient(orch_id, settings, app=app)
    _, ids = written_run(memory)
    path = db_path(settings, orch_id)
    with sqlite3.connect(path, timeout=30) as conn:
        conn.execute("UPDATE memories SET content = 'Something else' WHERE memory_id = ?",
                     (ids["oven"],))
    conn.close()
    before = stored(settings, orch_id)
    refused = cli(settings, "rebuild", "--from-log", "--orch", orch_id, "--json")
    assert refused.exit_code != 0
    answer = json.loads(refused.output)
    assert answer["ok"] is False and answer["reason"] == "conflict"
    assert [e["path"] for e in answer["errors"]] == [f"memories.{ids['oven']}"]
    assert stored(settings, orch_id) == before  # nothing changed

    unknown = cli(settings, "rebuild", "--from-log", "--orch", "no-such-orch")
    assert unknown.exit_code == 3 and "no orchestrator 'no-such-orch'" in unknown.output
    usage = cli(settings, "rebuild", "--dry-run", "--orch", orch_id)
    assert usage.exit_code == 2 and "--dry-run goes with --from-log" in usage.output
    helped = cli(settings, "rebuild", "--help")
    assert helped.exit_code == 0 and "--from-log" in helped.output
    assert "--dry-run" in helped.output
