"""Databases written by earlier releases keep working: schema migrations at open, and
the audit lookups of one memory that search ``memory_event_ids`` instead of scanning.

A schema-1 file is made the way the previous release left it: written by the current
code, then ``memory_event_ids`` dropped and ``meta.schema_version`` set back to 1. Its
``sqlite_master`` is checked against ``tests/data/memory_db_schema_v1.json``, the schema
release 89b6483 created, so the stand-in is that release's file, not an approximation.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memory_seed import as_released, as_schema
from orchmem_testing import make_settings

from orchmem.config import StorageError
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.governance.edits import Forget, Link, Supersede, apply_edit
from orchmem.models.governance.history import history
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.schema.migrations import MIGRATIONS, downgrade
from orchmem.models.storage.schema.tables import SCHEMA_VERSION
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.models.workspace.memlog import read_log
from orchmem.models.writeback.apply import write_memories

ORCH = "legacy"
SCHEMA_1 = Path(__file__).parents[2] / "data" / "memory_db_schema_v1.json"


def said(conversation: str, content: str) -> MemoryInput:
    return validate(MemoryInput, {"type": "Fact", "content": content, "source": {
        "sourceType": "channel_transcript", "capturedBy": "extractor",
        "conversationId": conversation}})


def seed(odb: OrchestratorDB) -> dict[str, str]:
    """Creates, a reinforcement from a second place, a supersede, a link: events naming
    one memory and events naming two."""
    ids: dict[str, str] = {}
    for name, key, memory in (("city", "k1", said("conv-a", "The office is in Porto")),
                              ("city", "k2", said("conv-b", "The office is in Porto")),
                              ("tool", "k3", said("conv-a", "The team uses Postgres")),
                              ("new_tool", "k4", said("conv-a", "The team moved to SQLite"))):
        result = write_memories(odb, key=key, task="t", memories=[memory])
        ids.setdefault(name, (result["created"] or result.get("reinforced") or [""])[0])
    apply_edit(odb, Supersede(op="supersede", memory_id=ids["tool"], by=ids["new_tool"],
                              reason="moved off Postgres"), key="e1", task="edit")
    apply_edit(odb, Link(op="link", from_memory_id=ids["city"], to_memory_id=ids["new_tool"],
                         edge_type="RelatedTo", reason="same team"), key="e2", task="edit")
    return ids


def schema(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL "
                            "ORDER BY type, name").fetchall()
    conn.close()
    return [r[0].strip() for r in rows]


def pairs(path: Path) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """(rows of memory_event_ids, pairs the JSON lists of memory_events name)."""
    with sqlite3.connect(path) as conn:
        indexed = set(conn.execute("SELECT memory_id, event_id FROM memory_event_ids"))
        named = {(m, e) for e, ids in conn.execute("SELECT id, memory_ids FROM memory_events")
                 for m in json.loads(ids)}
    conn.close()
    return indexed, named


def answers(odb: OrchestratorDB, ids: dict[str, str]) -> dict[str, Any]:
    """Every answer the three lookups give: history (events included), said_before."""
    out: dict[str, Any] = {name: history(odb, m, EVERYTHING) for name, m in ids.items()}
    with odb.read():
        city = memories.get(ids["city"])
        assert city is not None
        out["said_before"] = [memories.said_before(city, said(c, "The office is in Porto"))
                              for c in ("conv-a", "conv-b", "conv-c")]
    return out


def timeless(answers: dict[str, Any]) -> dict[str, Any]:
    """``answers`` without what only schema 4 knows (validFrom, validTo, timeRefs)."""
    out = dict(answers)
    for name, found in answers.items():
        if isinstance(found, dict) and "memory" in found:
            out[name] = {**found, "memory": {k: v for k, v in found["memory"].items()
                                             if k not in ("validFrom", "validTo", "timeRefs")}}
    return out


@pytest.fixture
def legacy(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A schema-1 memory.db with history, the answers it gave, a registry factory for it
    and one for an untouched schema-2 copy of the same file (``current``)."""
    settings = make_settings(tmp_path / "root", "")
    made = Databases(settings)
    odb = made.open(ORCH)
    assert odb is not None
    ids = seed(odb)
    before = answers(odb, ids)
    assert before["said_before"] == [True, True, False]  # conv-b is found by its event
    made.close_all()
    current = make_settings(tmp_path / "current", "")
    shutil.copytree(settings.root / "orchestrators", current.root / "orchestrators")
    as_schema(settings, ORCH, 1)
    yield {"registry": lambda **kw: Databases(settings, **kw), "path": odb.workspace.db_path,
           "ids": ids, "answers": before, "current": lambda: Databases(current)}


def test_the_stand_in_is_the_file_the_previous_release_wrote(legacy: Any) -> None:
    path = legacy["path"]
    assert as_released(schema(path)) == json.loads(SCHEMA_1.read_text())["schema"]


def test_a_schema_1_file_is_migrated_once_by_a_writer_and_answers_the_same(
        legacy: Any) -> None:
    registry, path = legacy["registry"], legacy["path"]
    ids, before = legacy["ids"], legacy["answers"]
    odb = registry().open(ORCH)
    assert odb.meta("schema_version") == str(SCHEMA_VERSION)
    indexed, named = pairs(path)
    assert indexed == named and len(named) > len(ids)  # some events name two memories
    assert answers(odb, ids) == before
    log = [r for r in read_log(odb.workspace.log_path) if r["event"] == "schema_migrated"]
    assert [r["version"] for r in log] == [step.version for step in MIGRATIONS]

    odb.close()
    again = registry().open(ORCH)
    assert pairs(path)[0] == indexed and again.meta("schema_version") == str(SCHEMA_VERSION)
    # Opened again: nothing more to migrate (one line per step, from the first open).
    assert len([r for r in read_log(odb.workspace.log_path)
                if r["event"] == "schema_migrated"]) == len(MIGRATIONS)  # once per step
    fresh = registry().workspace("fresh-one")
    registry().open("fresh-one")
    assert schema(path) == schema(fresh.db_path)  # migrated = created by this release


def test_a_reader_leaves_a_schema_1_file_alone_and_answers_the_same(legacy: Any) -> None:
    reader = legacy["registry"](readonly=True).open(ORCH)
    # Schema 1 has no time columns: the reader answers the same except that it cannot
    # know when a memory stopped being true (validTo), which schema 4 added.
    assert answers(reader, legacy["ids"]) == timeless(legacy["answers"])
    assert reader.meta("schema_version") == "1"
    assert "memory_event_ids" not in " ".join(schema(legacy["path"]))


def test_a_hard_forget_on_a_migrated_file_scrubs_the_same_events(legacy: Any) -> None:
    city = legacy["ids"]["city"]
    audits = []
    for registry in (legacy["registry"], legacy["current"]):
        odb = registry().open(ORCH)
        apply_edit(odb, Forget(op="forget", memory_id=city, hard=True), key="f1", task="edit")
        with sqlite3.connect(odb.workspace.db_path) as conn:
            audits.append(conn.execute(
                "SELECT id, op, memory_ids, before, after, reason, actor, idempotency_key "
                "FROM memory_events ORDER BY id").fetchall())
        conn.close()
        events = history(odb, city, EVERYTHING)["events"]
        assert [e["op"] for e in events] == ["create", "reinforce", "link", "forget_hard"]
        assert all(e["reason"] is None and "statement" not in (e["after"] or {})
                   for e in events)
    migrated, current = audits
    assert migrated == current


def test_a_file_newer_than_this_release_is_still_refused(legacy: Any) -> None:
    with sqlite3.connect(legacy["path"]) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     (str(SCHEMA_VERSION + 1),))
    conn.close()
    with pytest.raises(StorageError, match="newer than this orchmem"):
        legacy["registry"]().open(ORCH)


def test_the_migrations_are_numbered_in_order_up_to_the_schema_version() -> None:
    versions = [step.version for step in MIGRATIONS]
    # Ascending and unique, ending at SCHEMA_VERSION. Branches take their numbers ahead
    # of the merge (a step 4 may land before a step 3), so the numbers may have a gap.
    assert versions == sorted(set(versions)) and versions[0] == 2
    assert versions[-1] == SCHEMA_VERSION


SNAPSHOTS = {int(p.stem.rsplit("_v", 1)[1]): p
             for p in SCHEMA_1.parent.glob("memory_db_schema_v*.json")}


@pytest.mark.parametrize("version", sorted(SNAPSHOTS))
def test_the_down_steps_give_back_the_schema_each_release_wrote_and_up_again_the_new_one(
        tmp_path: Path, version: int) -> None:
    settings = make_settings(tmp_path / "root", "")
    made = Databases(settings)
    odb = made.open(ORCH)
    assert odb is not None
    ids = seed(odb)
    before = answers(odb, ids)
    made.close_all()
    path = as_schema(settings, ORCH, version)
    assert as_released(schema(path)) == json.loads(SNAPSHOTS[version].read_text())["schema"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                            ).fetchone() == (str(version),)
    conn.close()
    again = Databases(settings)
    upgraded = again.open(ORCH)
    assert upgraded is not None and answers(upgraded, ids) == before
    again.open("fresh-one")
    assert schema(path) == schema(again.workspace("fresh-one").db_path)
    again.close_all()


def test_a_downgrade_to_a_version_this_release_does_not_know_is_refused(
        tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "root", "")
    made = Databases(settings)
    odb = made.open(ORCH)
    assert odb is not None
    for wrong in (0, SCHEMA_VERSION + 1):
        with pytest.raises(ValueError, match="not between 1 and"):
            downgrade(odb, wrong)
    assert downgrade(odb, SCHEMA_VERSION) == []
    made.close_all()
