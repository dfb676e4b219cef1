"""Migrations with a backup first, one transaction, a check, and degraded mode on failure."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from memory_seed import as_released, as_schema, seed
from orchmem_testing import WorkerProcess, make_settings

from orchmem.config import MemoryDegraded, Settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.portability.export import FILES, export_jsonl
from orchmem.models.storage.db.backup import check_backup, list_backups
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.db.stats import stats
from orchmem.models.storage.delivery.outbox import Outbox, prune_done
from orchmem.models.storage.schema import migrations
from orchmem.models.storage.schema.tables import SCHEMA_VERSION
from orchmem.models.telemetry import meters, names
from orchmem.models.workspace.memlog import read_log
from orchmem.models.writeback.apply import write_memories
from orchmem.worker.cli.main import main
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import create_app

ORCH = "upgrader"
SCHEMA_1 = Path(__file__).parents[2] / "data" / "memory_db_schema_v1.json"
#: The schema (sqlite_master) each shipped release created, by schema version.
SNAPSHOTS = {int(p.stem.rsplit("_v", 1)[1]): p
             for p in SCHEMA_1.parent.glob("memory_db_schema_v*.json")}


def schema(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL "
                            "ORDER BY type, name").fetchall()
    conn.close()
    return [r[0].strip() for r in rows]


def ranks(settings: Settings) -> list[tuple[str, int]]:
    from datetime import UTC, datetime

    from orchmem.models.recall.search import recall

    out = []
    for query in ("where is the office", "what are the goals", "the user's name"):
        bundle = recall(ORCH, query, databases=Databases(settings, readonly=True),
                        now=datetime(2030, 1, 1, tzinfo=UTC))
        out += [(n.memory.memory_id, n.rank) for n in bundle.nodes]
    assert out
    return out


def make_legacy(tmp_path: Path, embedder: Embedder, version: int) -> dict[str, Any]:
    """A file of schema ``version`` with every kind of row, and its export and recall as
    the current schema gave them."""
    settings = make_settings(tmp_path / "root", "")
    databases = Databases(settings)
    odb = databases.open(ORCH)
    assert odb is not None
    seed(odb, embedder)
    export_jsonl(odb, tmp_path / "before")
    before = ranks(settings)
    databases.close_all()
    as_schema(settings, ORCH, version)
    assert as_released(schema(odb.workspace.db_path)) == \
        json.loads(SNAPSHOTS[version].read_text())["schema"]
    return {"settings": settings, "workspace": odb.workspace, "ranks": before,
            "export": tmp_path / "before", "tmp": tmp_path}


@pytest.fixture
def legacy(tmp_path: Path, embedder: Embedder) -> Iterator[dict[str, Any]]:
    """A schema-1 file with every kind of row, its export and recall as schema 2 gave them."""
    yield make_legacy(tmp_path, embedder, 1)


@pytest.mark.parametrize("version", sorted(SNAPSHOTS))
def test_a_file_of_every_shipped_schema_migrates_intact_and_recall_finds_the_same(
        tmp_path: Path, embedder: Embedder, version: int) -> None:
    legacy = make_legacy(tmp_path, embedder, version)
    odb = Databases(legacy["settings"]).open(ORCH)
    assert odb is not None and odb.meta("schema_version") == str(SCHEMA_VERSION)
    same_export(odb, legacy, "after")  # every memory, source, edge and audit event
    assert ranks(legacy["settings"]) == legacy["ranks"]


def same_export(odb: OrchestratorDB, legacy: Any, name: str) -> None:
    export_jsonl(odb, legacy["tmp"] / name)
    for kind in FILES:
        assert (legacy["tmp"] / name / FILES[kind]).read_bytes() == \
            (legacy["export"] / FILES[kind]).read_bytes(), kind


def test_a_v1_file_migrates_with_everything_intact_and_recall_finds_the_same(
        legacy: Any) -> None:
    odb = Databases(legacy["settings"]).open(ORCH)
    assert odb is not None
    assert odb.meta("schema_version") == str(SCHEMA_VERSION)
    assert odb.meta("last_migrated_at")
    same_export(odb, legacy, "after")  # every memory, source, edge and audit event
    assert ranks(legacy["settings"]) == legacy["ranks"]
    backups = list_backups(legacy["workspace"])
    assert [b.reason for b in backups] == ["premigrate-v1"]
    assert check_backup(backups[0].path, ORCH) == 1

    again = Databases(legacy["settings"]).open(ORCH)  # re-running: a no-op
    assert again is not None and len(list_backups(legacy["workspace"])) == 1
    migrated = [r for r in read_log(odb.workspace.log_path) if r["event"] == "schema_migrated"]
    assert [(r["version"], r["fromVersion"]) for r in migrated] == \
        [(step.version, 1) for step in migrations.MIGRATIONS]


def fails_after_its_ddl(odb: OrchestratorDB) -> None:
    migrations.upgrade_to_2(odb)
    raise RuntimeError("disk said no")


def loses_a_row(odb: OrchestratorDB) -> None:
    migrations.upgrade_to_2(odb)
    odb.db.execute_sql("DELETE FROM memory_sources WHERE id = (SELECT max(id) FROM "
                       "memory_sources)")


def garbles_the_vectors(odb: OrchestratorDB) -> None:
    """Every row kept, integrity fine: only the sample recall sees recall is broken."""
    migrations.upgrade_to_2(odb)
    odb.db.execute_sql("UPDATE memory_embeddings SET vector = zeroblob(length(vector))")


@pytest.mark.parametrize("step,message", [
    (fails_after_its_ddl, "disk said no"),
    (loses_a_row, "memory_sources: 9 rows before, 8"),
    (garbles_the_vectors, "sample recall: the vector of")])
def test_a_failed_migration_restores_the_file_and_degrades_to_read_only(
        legacy: Any, monkeypatch: pytest.MonkeyPatch, step: Any, message: str) -> None:
    monkeypatch.setattr(migrations, "MIGRATIONS",
                        [migrations.Step(2, step, migrations.downgrade_from_2)])
    odb = Databases(legacy["settings"]).open(ORCH)
    assert odb is not None
    assert as_released(schema(odb.workspace.db_path)) == \
        json.loads(SCHEMA_1.read_text())["schema"]
    assert odb.meta("schema_version") == "1"
    info = json.loads(odb.workspace.degraded_marker.read_text())
    assert message in info["reason"] and info["backup"].endswith("premigrate-v1.db")

    assert ranks(legacy["settings"]) == legacy["ranks"]  # reads work
    memory = validate(MemoryInput, {"type": "Fact", "content": "A new fact",
                                    "source": {"sourceType": "manual", "capturedBy": "user"}})
    with pytest.raises(MemoryDegraded, match=r"read-only.*orchmem migrate --orch upgrader"):
        write_memories(odb, key="w1", task="t", memories=[memory])
    assert stats(odb)["degraded"]["reason"] == info["reason"]
    root = str(legacy["settings"].root)
    result = CliRunner().invoke(main, ["--root", root, "check"])
    assert result.exit_code == 1 and f"{ORCH}: degraded" in result.output

    monkeypatch.undo()  # the cause is fixed: `orchmem migrate` clears the mark, migrates
    result = CliRunner().invoke(main, ["--root", root, "migrate", "--orch", ORCH, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["orchestrators"][ORCH]["status"] == "migrated"
    odb = Databases(legacy["settings"]).open(ORCH)
    assert odb is not None and odb.meta("schema_version") == str(SCHEMA_VERSION)
    write_memories(odb, key="w1", task="t", memories=[memory])
    assert stats(odb)["degraded"] is None


class Counted:
    """A metrics sink (models/telemetry/meters.py) that keeps what it is given."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, float, dict[str, str]]] = []

    def record(self, name: str, kind: str, value: float, attributes: dict[str, str]) -> None:
        self.seen.append((name, value, attributes))


@pytest.mark.parametrize("fails", [False, True])
def test_a_migration_is_counted_as_started_then_completed_or_failed(
        legacy: Any, monkeypatch: pytest.MonkeyPatch, fails: bool) -> None:
    if fails:
        monkeypatch.setattr(migrations, "MIGRATIONS", [
            migrations.Step(2, fails_after_its_ddl, migrations.downgrade_from_2)])
    counted = Counted()
    meters.install_sink(counted)
    try:
        odb = Databases(legacy["settings"]).open(ORCH)
    finally:
        meters.install_sink(None)
    assert odb is not None and odb.workspace.degraded_marker.exists() is fails
    assert counted.seen == [
        (names.M_MIGRATIONS, 1, {names.OUTCOME: "started"}),
        (names.M_MIGRATIONS, 1, {names.OUTCOME: "failed" if fails else "completed"})]


def test_migrate_dry_run_and_all(legacy: Any) -> None:
    root = str(legacy["settings"].root)
    runner = CliRunner()
    result = runner.invoke(main, ["--root", root, "migrate", "--all", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["orchestrators"][ORCH] == {
        "status": "would migrate", "schemaVersion": 1,
        "steps": [step.version for step in migrations.MIGRATIONS]}
    assert list_backups(legacy["workspace"]) == []
    result = runner.invoke(main, ["--root", root, "migrate", "--all", "--json"])
    assert json.loads(result.output)["orchestrators"][ORCH]["status"] == "migrated"
    result = runner.invoke(main, ["--root", root, "migrate", "--orch", ORCH, "--json"])
    assert json.loads(result.output)["orchestrators"][ORCH]["status"] == "current"
    result = runner.invoke(main, ["--root", root, "migrate"])
    assert result.exit_code == 2 and "--orch ID, or --all" in result.output


def test_a_write_to_a_degraded_memory_is_refused_and_stays_in_the_outbox(
        legacy: Any, monkeypatch: pytest.MonkeyPatch, isolated: Any) -> None:
    monkeypatch.setattr(migrations, "MIGRATIONS", [
        migrations.Step(2, fails_after_its_ddl, migrations.downgrade_from_2)])
    odb = Databases(legacy["settings"]).open(ORCH)  # the failed migration: degraded
    assert odb is not None and odb.workspace.degraded_marker.exists()
    settings = isolated(shards=1)  # the same root, with a broker and a real worker
    assert settings.root == legacy["settings"].root
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        client = MemoryClient(ORCH, settings, app=app)
        handle = client.write_back(memories=[{"type": "Fact", "content": "Kept for later",
                                              "source": {"sourceType": "manual",
                                                         "capturedBy": "user"}}],
                                   idempotency_key="later-1")
        assert handle.ok
        failure = handle._async.get(timeout=60, propagate=False)
        assert isinstance(failure, MemoryDegraded)
        outbox = Outbox(legacy["workspace"].outbox_path)
        try:
            assert prune_done(outbox, odb) == ["later-1"]  # no receipt: it stays
        finally:
            outbox.close()
        assert [n.memory.content for n in client.recall("office").nodes]  # reads work
    finally:
        worker.stop()


def test_migrate_to_an_earlier_version_and_back_up_again(legacy: Any) -> None:
    """``orchmem migrate --to N``: the down steps, with a backup, then the file that
    release wrote; a plain ``migrate`` brings it back with everything intact."""
    root, workspace = str(legacy["settings"].root), legacy["workspace"]
    runner = CliRunner()
    assert runner.invoke(main, ["--root", root, "migrate", "--orch", ORCH]).exit_code == 0
    result = runner.invoke(main, ["--root", root, "migrate", "--orch", ORCH, "--to", "1",
                                  "--dry-run", "--json"])
    assert json.loads(result.output)["orchestrators"][ORCH] == {
        "status": "would downgrade", "schemaVersion": SCHEMA_VERSION,
        "steps": [step.version for step in reversed(migrations.MIGRATIONS)]}
    result = runner.invoke(main, ["--root", root, "migrate", "--orch", ORCH, "--to", "1",
                                  "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["orchestrators"][ORCH]["status"] == "downgraded"
    assert as_released(schema(workspace.db_path)) == json.loads(SCHEMA_1.read_text())["schema"]
    assert [b.reason for b in list_backups(workspace)][-1] == f"predowngrade-v{SCHEMA_VERSION}"
    again = runner.invoke(main, ["--root", root, "migrate", "--orch", ORCH, "--to", "1",
                                 "--json"])
    assert json.loads(again.output)["orchestrators"][ORCH]["status"] == "current"
    wrong = runner.invoke(main, ["--root", root, "migrate", "--orch", ORCH, "--to",
                                 str(SCHEMA_VERSION + 1)])
    assert wrong.exit_code == 2 and "--to" in wrong.output

    result = runner.invoke(main, ["--root", root, "migrate", "--orch", ORCH, "--json"])
    assert json.loads(result.output)["orchestrators"][ORCH]["status"] == "migrated"
    odb = Databases(legacy["settings"]).open(ORCH)
    assert odb is not None
    same_export(odb, legacy, "round-trip")
    assert ranks(legacy["settings"]) == legacy["ranks"]
