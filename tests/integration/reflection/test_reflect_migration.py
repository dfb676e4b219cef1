"""Schema 6: a file of the previous schema gains reflection's tables and ``topic``, its
contradictions become conflict insights, and ``downgrade_from_6`` undoes it exactly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchmem_testing import make_settings

from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.schema.steps_reflect import downgrade_from_6
from orchmem.models.storage.schema.tables import SCHEMA_VERSION
from orchmem.models.writeback.apply import write_memories


def schema(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL "
                            "ORDER BY type, name").fetchall()
    conn.close()
    return [r[0] for r in rows]


def identity(content: str, at: str) -> MemoryInput:
    return validate(MemoryInput, {"type": "Identity", "content": content, "createdAt": at,
                                  "source": {"sourceType": "manual",
                                             "capturedBy": "extractor"}})


def test_a_previous_schema_file_migrates_to_6_with_its_conflicts_as_insights(
        tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "root", "")
    made = Databases(settings)
    odb = made.open("old")
    assert odb is not None
    result = write_memories(odb, key="k", task="t", memories=[
        identity("I live in Lisbon", "2026-01-01T00:00:00Z"),
        identity("I live in Porto", "2026-02-01T00:00:00Z")])
    assert result["contradicted"]
    path = odb.workspace.db_path
    current = schema(path)
    with odb.write():
        downgrade_from_6(odb)
        odb.db.execute_sql("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    made.close_all()
    older = schema(path)
    assert not any("insights" in s or "crystals" in s or "memory_topics" in s for s in older)

    again = Databases(settings).open("old")
    assert again is not None
    assert schema(path) == current
    rows = again.sql("SELECT kind, status, memory_ids FROM insights")
    newer_id, older_id = result["contradicted"][0]
    assert rows == [("conflict", "open", f'["{newer_id}","{older_id}"]')]
    # Step 6 and every later one: the file is at this release's version.
    assert again.sql("SELECT value FROM meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)]
