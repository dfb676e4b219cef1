"""Memory snapshots on the log (the tape) in the client's in-process mode: which writes
log one, that a caller cannot, and that a file older than the log still works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from orchmem_testing import make_settings
from orchmem_testing import open_odb as odb_of

from orchmem.config import MemoryValidationError
from orchmem.models.execlog.rules import check_log_request
from orchmem.models.execlog.tape import rebuild_from_log
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.execlog.entries import read_log, tail_log
from orchmem.models.storage.memories.events import add_event
from orchmem.models.storage.schema.migrations import downgrade
from orchmem.worker import MemoryClient

ORCH = "tape-bot"


@pytest.fixture
def memory(tmp_path: Path) -> MemoryClient:
    return MemoryClient(ORCH, make_settings(tmp_path / "root", ""), immediate=True)


def snapshots(memory: MemoryClient) -> list[tuple[str, str]]:
    return [(str(n), str(s)) for n, s in odb_of(memory).sql(
        "SELECT name, status FROM log_events WHERE kind = 'memory_stored' ORDER BY seq")]


def test_only_memories_written_from_a_run_are_snapshotted_and_each_change_adds_one(
        memory: MemoryClient) -> None:
    by_hand = memory.write_back(memories=[{"type": "Fact", "content": "Tea at four"}]).wait(30)
    assert by_hand is not None and by_hand["ok"]
    assert snapshots(memory) == []  # no run: not on the tape
    with memory.run("plan") as run, run.step("decide") as step:
        done = step.write_back(memories=[{"type": "Fact", "content": "Coffee at nine"}]).wait(30)
    assert done is not None and done["ok"]
    [memory_id] = done["memoryIds"]
    assert snapshots(memory) == [(memory_id, "create")]
    patched = memory.patch(memory_id, importance=90, reason="it matters").wait(30)
    assert patched is not None and patched["ok"], patched
    assert snapshots(memory) == [(memory_id, "create"), (memory_id, "patch")]
    by_hand_patch = memory.patch(by_hand["memoryIds"][0], importance=90).wait(30)
    assert by_hand_patch is not None and by_hand_patch["ok"]
    assert len(snapshots(memory)) == 2


def test_a_caller_cannot_log_a_snapshot(memory: MemoryClient) -> None:
    with memory.run("plan") as run:
        pass
    with pytest.raises(MemoryValidationError, match=r"events\.0\.kind"):
        check_log_request({"events": [{"runId": run.run_id, "kind": "memory_stored"}]},
                          ORCH, memory.memory.log)


def test_a_file_older_than_the_log_writes_and_rebuilds_nothing_from_it(
        tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "root", "")
    made = Databases(settings)
    odb = made.open(ORCH)
    assert odb is not None
    downgrade(odb, 4)
    made.close_all()
    old = Databases(settings).open(ORCH, migrate_up=False)
    assert old is not None and old.meta("schema_version") == "4"
    with old.write():  # an audited change on a file without the log's tables
        add_event("retract", ["m-none"], reason="old file")
    report = rebuild_from_log(old, embedder=None, batch_size=8)
    assert report["snapshots"] == 0 and report["written"]["records"] == 0
    old.close()


def test_a_secret_stays_restricted_on_the_tape_and_out_of_every_log_reader(
        memory: MemoryClient) -> None:
    with memory.run("set up the server") as run, run.step("configure") as step:
        done = step.write_back(memories=[
            {"type": "Fact", "content": "My password is Hunter2qz9 for the staging box"}]
        ).wait(30)
    assert done is not None and done["ok"]
    odb = odb_of(memory)
    [(data,)] = odb.sql("SELECT data FROM log_events WHERE kind = 'memory_stored'")
    record = json.loads(data)["record"]
    assert record["sensitivity"] == "restricted"  # as the stored row: the detector ran first
    assert record["content"] == odb.sql("SELECT content FROM memories")[0][0]
    events, _ = read_log(odb, run_id=run.run_id, limit=100)
    assert "Hunter2qz9" not in json.dumps(events + tail_log(odb, 100))
    assert "memory_stored" not in {e["kind"] for e in events}


def test_memories_hard_forgotten_by_their_run_come_back_as_tombstones_only(
        memory: MemoryClient) -> None:
    with memory.run("plan") as run, run.step("decide") as step:
        done = step.write_back(memories=[
            {"type": "Fact", "content": "The quarrystone bridge opens in May"},
            {"type": "Fact", "content": "The quarrystone tunnel closes in June"}]).wait(30)
    assert done is not None and done["ok"]
    forgot = memory.forget_where(workflow_run_id=run.run_id, hard=True).wait(30)
    assert forgot is not None and forgot["ok"] and forgot["count"] == 2, forgot
    assert forgot["erased"]["logSnapshots"] == 2
    odb = odb_of(memory)
    assert odb.sql("SELECT count(*) FROM log_events WHERE text LIKE '%quarrystone%' "
                   "OR data LIKE '%quarrystone%'") == [(0,)]
    with odb.write():
        odb.db.execute_sql("DELETE FROM memories")
    report = rebuild_from_log(odb, embedder=None, batch_size=8)
    assert report["written"]["records"] == 2 and report["written"]["tombstones"] == 2
    assert sorted(odb.sql("SELECT memory_id, content, forgotten FROM memories")) == \
        sorted((m, "", 1) for m in done["memoryIds"])
