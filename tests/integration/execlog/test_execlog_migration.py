"""Migration step 5 (the execution log): up on an older file gives a new file's schema,
down removes exactly what up added."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchmem_testing import make_settings

from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.schema import steps_log
from orchmem.models.storage.schema.migrations import downgrade
from orchmem.models.storage.schema.tables import SCHEMA_VERSION

ORCH = "mig-log"
MINE = ("log_runs", "log_events", "episodes", "episode_memories", "episode_fts")


def schema(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL "
                            "ORDER BY type, name").fetchall()
    conn.close()
    return [str(r[0]) for r in rows]


def test_down_removes_the_log_and_up_gives_back_a_new_files_schema(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "root", "")
    made = Databases(settings)
    odb = made.open(ORCH)
    assert odb is not None
    path = odb.workspace.db_path
    new = schema(path)
    assert any('"log_events"' in s for s in new) and SCHEMA_VERSION >= steps_log.VERSION
    odb.db.execute_sql("INSERT INTO memories (memory_id, type, importance, content, summary, "
                       "confidence, status, source_type, captured_by, fingerprint, stated, "
                       "reinforcements, forgotten, created_at, updated_at) VALUES "
                       "('m-1', 'Fact', 50, 'kept', 'kept', 0.8, 'active', 'manual', 'user', "
                       "'f', 0, 0, 0, 'x', 'x')")
    odb.db.execute_sql("INSERT INTO memory_sources (memory_id, source_type, captured_by, "
                       "captured_at) VALUES ('m-1', 'manual', 'user', 'x')")
    with odb.write():  # the step alone: independent of the other numbered steps
        steps_log.down(odb)
    older = schema(path)
    assert older == [s for s in new if not any(name in s for name in MINE)]
    with odb.write():
        steps_log.up(odb)
    assert schema(path) == new
    # Through the numbered steps: down to the version before it, then a writer's open.
    assert steps_log.VERSION in downgrade(odb, steps_log.VERSION - 1)
    assert not [s for s in schema(path) if any(name in s for name in MINE)]
    made.close_all()
    again = Databases(settings)
    upgraded = again.open(ORCH)
    assert upgraded is not None and upgraded.meta("schema_version") == str(SCHEMA_VERSION)
    assert schema(path) == new
    assert upgraded.sql("SELECT content FROM memories") == [("kept",)]
    again.close_all()
