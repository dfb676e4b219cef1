"""Backups through SQLite's online backup API, retention, and restore under the write lock."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from memory_seed import seed
from orchmem_testing import make_settings, wait_until

from orchmem.config import MemoryCorrupt
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.portability.export import FILES, export_jsonl
from orchmem.models.storage.db.backup import list_backups, restore_backup, take_backup
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.schema.tables import SCHEMA_VERSION
from orchmem.models.storage.search.vectors import index_for
from orchmem.models.writeback.apply import write_memories
from orchmem.tasks.maintenance import FANOUT
from orchmem.worker.cli.main import main
from orchmem.worker.runtime.shards import shard_for

ORCH = "keeper"


def fact(text: str) -> MemoryInput:
    return validate(MemoryInput, {"type": "Fact", "content": text,
                                  "source": {"sourceType": "manual", "capturedBy": "user"}})


@pytest.fixture
def memory(tmp_path: Path, embedder: Embedder) -> dict[str, Any]:
    settings = make_settings(tmp_path / "root", "")
    odb = Databases(settings).open(ORCH)
    assert odb is not None
    seed(odb, embedder)
    return {"settings": settings, "odb": odb, "root": str(settings.root)}


def cli(memory: dict[str, Any], *args: str) -> Any:
    result = CliRunner().invoke(main, ["--root", memory["root"], *args, "--json"],
                                env={"ORCHMEM_BACKUP__RETENTION_COUNT": "2"})
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def same(a: Path, b: Path) -> bool:
    return all((a / n).read_bytes() == (b / n).read_bytes() for n in FILES.values())


def test_a_backup_holds_what_is_committed_even_while_only_in_the_wal(
        memory: dict[str, Any], tmp_path: Path) -> None:
    odb: OrchestratorDB = memory["odb"]
    write_memories(odb, key="late", task="t", memories=[fact("Only in the WAL so far")])
    wal = odb.workspace.db_path.with_name("memory.db-wal")
    assert wal.stat().st_size > 0  # a copy of memory.db alone would miss that write
    path = Path(cli(memory, "backup", "--orch", ORCH)["backup"])
    assert path.parent == odb.workspace.backups_dir and path.name.endswith("-manual.db")
    assert not path.with_name(path.name + "-wal").exists()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("SELECT count(*) FROM memories WHERE content = ?",
                            ("Only in the WAL so far",)).fetchone()[0] == 1
    conn.close()


def test_retention_keeps_the_newest_manual_backups_and_every_premigration_one(
        memory: dict[str, Any]) -> None:
    odb: OrchestratorDB = memory["odb"]
    take_backup(odb, "premigrate-v1")
    made = [cli(memory, "backup", "--orch", ORCH)["backup"] for _ in range(3)]
    kept = list_backups(odb.workspace)
    assert [str(b.path) for b in kept if b.reason == "manual"] == made[1:]
    assert [b.reason for b in kept].count("premigrate-v1") == 1
    listed = cli(memory, "backup", "--orch", ORCH, "--list")["backups"]
    assert [b["path"] for b in listed] == [str(b.path) for b in kept]


def test_restore_brings_back_the_backup_and_readers_follow(
        memory: dict[str, Any], tmp_path: Path, embedder: Embedder) -> None:
    odb: OrchestratorDB = memory["odb"]
    export_jsonl(odb, tmp_path / "before")
    backup = Path(cli(memory, "backup", "--orch", ORCH)["backup"])
    reader = Databases(memory["settings"], readonly=True).open(ORCH)
    assert reader is not None
    vectors = embedder.encode(["Written after the backup"])
    write_memories(odb, key="after", task="t", memories=[fact("Written after the backup")],
                   vectors=list(vectors), embedder=embedder.version)
    with reader.read():
        cached = len(index_for(reader, embedder.version, 384))

    report = cli(memory, "restore", "--orch", ORCH, backup.name)
    assert report["schemaVersion"] == SCHEMA_VERSION
    assert report["previous"].endswith("-prerestore.db")
    export_jsonl(odb, tmp_path / "after")
    assert same(tmp_path / "before", tmp_path / "after")
    with reader.read():
        assert len(index_for(reader, embedder.version, 384)) == cached - 1  # cache dropped


def test_restore_waits_for_a_writer_and_never_mixes(memory: dict[str, Any],
                                                    tmp_path: Path) -> None:
    odb: OrchestratorDB = memory["odb"]
    export_jsonl(odb, tmp_path / "before")
    backup = take_backup(odb, "manual")
    holding = threading.Event()

    def writer() -> None:
        conn = sqlite3.connect(odb.workspace.db_path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE memories SET importance = 1")
        holding.set()
        time.sleep(1.0)
        conn.execute("COMMIT")
        conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    holding.wait(5)
    started = time.monotonic()
    restore_backup(odb.workspace, backup, busy_timeout_ms=10_000)
    waited = time.monotonic() - started
    thread.join()
    assert waited > 0.5  # it waited for the writer's commit, then copied
    export_jsonl(odb, tmp_path / "after")
    assert same(tmp_path / "before", tmp_path / "after")


def test_a_backup_of_another_orchestrator_is_refused(memory: dict[str, Any],
                                                     tmp_path: Path) -> None:
    other = Databases(make_settings(tmp_path / "other", "")).open("someone-else")
    assert other is not None
    foreign = take_backup(other, "manual")
    with pytest.raises(MemoryCorrupt, match="belongs to orchestrator 'someone-else'"):
        restore_backup(memory["odb"].workspace, foreign, busy_timeout_ms=1000)


def test_the_beat_backup_job_backs_up_each_orchestrator_of_the_shard(
        settings: Any, app: Any, worker: Any, orch_id: str) -> None:
    odb = Databases(settings).open(orch_id)
    assert odb is not None
    write_memories(odb, key="k", task="t", memories=[fact("Back me up on schedule")])
    shard = shard_for(settings, orch_id)
    result = app.send_task(FANOUT, kwargs={"shard": shard, "job": "backup"}).get(timeout=60)
    assert orch_id in result["published"]
    wait_until(lambda: [b.reason for b in list_backups(odb.workspace)] == ["scheduled"], 60,
               message="the scheduled backup")
