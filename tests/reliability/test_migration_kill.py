"""kill -9 during a migration, at several points: the next open finishes it, the file is
never half-migrated, nothing is lost, and the backup is there."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memory_seed import as_schema, seed
from orchmem_testing import make_settings

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.portability.export import FILES, export_jsonl
from orchmem.models.storage.db.backup import check_backup, list_backups
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.schema.tables import SCHEMA_VERSION

ORCH = "killed-upgrade"
HELPER = Path(__file__).with_name("migration_kill_helper.py")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> dict[str, Any]:
    """A schema-1 memory.db (made once) and the export its schema-2 original gave."""
    base = tmp_path_factory.mktemp("kill")
    settings = make_settings(base / "root", "")
    databases = Databases(settings)
    odb = databases.open(ORCH)
    assert odb is not None
    seed(odb, embedder)
    export_jsonl(odb, base / "export")
    databases.close_all()
    as_schema(settings, ORCH, 1)
    return {"db": odb.workspace.db_path.read_bytes(), "export": base / "export"}


def state(path: Path) -> tuple[str, bool, list[str]]:
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        check = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    conn.close()
    return version[0], "memory_event_ids" in tables, check


@pytest.mark.parametrize("point", ["backup", "step", "check", "commit"])
def test_a_migration_killed_at_any_point_is_finished_by_the_next_open(
        tmp_path: Path, template: dict[str, Any], point: str) -> None:
    settings = make_settings(tmp_path / "root", "")
    workspace = Databases(settings).workspace(ORCH)
    workspace.ensure()
    workspace.db_path.write_bytes(template["db"])

    run = subprocess.run([sys.executable, str(HELPER), str(settings.root), ORCH, point],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == -signal.SIGKILL, run.stderr
    version, indexed, check = state(workspace.db_path)
    assert check == ["ok"]
    # Never half-migrated: the old version without the new table, or the new one with it.
    done = (str(SCHEMA_VERSION), True)
    assert (version, indexed) == (done if point == "commit" else ("1", False))
    partial = list(workspace.backups_dir.glob(".*.partial"))
    assert (len(partial) == 1) == (point == "backup")

    odb = Databases(settings).open(ORCH)
    assert odb is not None and odb.meta("schema_version") == str(SCHEMA_VERSION)
    export_jsonl(odb, tmp_path / "after")
    for kind in FILES:
        assert (tmp_path / "after" / FILES[kind]).read_bytes() == \
            (template["export"] / FILES[kind]).read_bytes(), kind
    with odb.bound():
        pairs = set(odb.db.execute_sql("SELECT memory_id, event_id FROM memory_event_ids"))
        named = {(m, e) for e, ids in odb.db.execute_sql(
            "SELECT id, memory_ids FROM memory_events") for m in json.loads(ids)}
    assert pairs == named
    backups = list_backups(workspace)
    assert backups and all(b.reason == "premigrate-v1" for b in backups)
    assert all(check_backup(b.path, ORCH) == 1 for b in backups)
    assert not list(workspace.backups_dir.glob(".*.partial"))
    assert not workspace.degraded_marker.exists()
