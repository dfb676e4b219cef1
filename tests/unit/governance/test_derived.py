"""The hard forget's registry (models/governance/derived.py) names every table and file the codebase
derives from memories, and every entry has a step that runs."""

from __future__ import annotations

import re
from pathlib import Path

from orchmem_testing import free_port, make_settings

from orchmem.models.bulletin import working
from orchmem.models.bulletin.compose import SNAPSHOT_JSON, SNAPSHOT_MD
from orchmem.models.governance import derived
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.schema.tables import NOT_DERIVED_TABLES
from orchmem.tasks.forget import STEPS

PACKAGE = Path(derived.__file__).resolve().parents[2]
#: Shadow tables SQLite keeps for an FTS5 table ``t``: ``t_data``, ``t_idx``, …
_SHADOW = re.compile(r"^(.+)_(data|idx|docsize|config|content)$")


def db_tables(tmp_path: Path) -> set[str]:
    """The tables of a freshly created, fully migrated memory.db (FTS shadow tables
    counted as their FTS table)."""
    settings = make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0")
    databases = Databases(settings)
    odb = databases.open("derived-tables")
    assert odb is not None
    try:
        names = {str(r[0]) for r in odb.sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%'")}
    finally:
        databases.close_all()
    virtual = {n for n in names if not _SHADOW.match(n)} & {
        m.group(1) for n in names if (m := _SHADOW.match(n))}
    return {n for n in names if not ((m := _SHADOW.match(n)) and m.group(1) in virtual)}


def registry_tables() -> set[str]:
    return {t for e in derived.REGISTRY if e.home == "memory.db" for t in e.where}


def test_every_table_of_memory_db_is_in_the_registry_or_named_wordless(
        tmp_path: Path) -> None:
    tables = db_tables(tmp_path)
    assert {"memory_fts", "episode_fts", "crystals", "insights"} <= tables
    assert registry_tables() & set(NOT_DERIVED_TABLES) == set()
    assert tables == registry_tables() | set(NOT_DERIVED_TABLES)


def test_every_file_written_under_bulletins_is_in_the_registry() -> None:
    written = {"FILE_NAME": working.FILE_NAME, "SNAPSHOT_JSON": SNAPSHOT_JSON,
               "SNAPSHOT_MD": SNAPSHOT_MD}
    named = set()
    for path in (p for layer in ("models", "tasks", "worker")
                 for p in (PACKAGE / layer).glob("**/*.py")):
        for found in re.findall(r"bulletins_dir\s*/\s*(\"[^\"]+\"|\w+)", path.read_text()):
            named.add(found.strip('"') if found.startswith('"') else written[found])
    files = {p for e in derived.REGISTRY if e.home == "root" for p in e.where
             if p.startswith("bulletins/")}
    assert named and {f"bulletins/{n}" for n in named} <= files
    assert files == {f"bulletins/{n}" for n in written.values()}


def test_tasks_run_a_step_for_every_entry_left_to_them() -> None:
    assert set(STEPS) == set(derived.task_steps())
    assert {"bulletin snapshot", "task results", "append-only file"} <= set(STEPS)


def test_every_entry_has_a_step_and_a_unique_name() -> None:
    names = [e.name for e in derived.REGISTRY]
    assert len(names) == len(set(names))
    for entry in derived.REGISTRY:
        steps = [entry.during, entry.after]
        assert entry.by_task != any(s is not None for s in steps), entry.name
        assert entry.where and entry.does, entry.name


def test_the_registry_names_every_kind_of_derived_artifact() -> None:
    where = {p for e in derived.REGISTRY for p in e.where}
    assert {"memory_fts", "memory_embeddings", "memory_topics", "insights", "crystals",
            "episodes", "episode_fts", "log_events", "dead_letters", "outbox.db",
            "ingest/processed/", f"bulletins/{working.FILE_NAME}",
            f"bulletins/{SNAPSHOT_JSON}"} <= where
    assert {e.home for e in derived.REGISTRY} == {"memory.db", "root", "broker", "process"}
