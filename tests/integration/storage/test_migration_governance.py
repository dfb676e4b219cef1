"""Governance across schema migrations, on real files through the real CLI.

``orchmem migrate --to 2 --force`` then ``orchmem migrate`` gives every memory its
governance back exactly (the side table ``governance_kept``); without ``--force`` a
downgrade that the older schema cannot govern is refused. A file below 3, downgraded
by this release or left by an older one without the side table, is read and migrated
up never less sensitive than its memories were (the secret detector decides for the
memories nothing was kept for).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from orchmem_testing import make_settings

from orchmem.config import Settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.backup import list_backups
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.schema.tables import SCHEMA_VERSION
from orchmem.models.storage.visibility import DEFAULT_VIEW, View
from orchmem.models.writeback.apply import write_memories
from orchmem.worker.cli.main import main

ORCH = "governed"
KEY_TEXT = "Use the AWS access key AKIAZ7QW3ER5TY8UI9OP for the backup job"
MANUAL = {"sourceType": "manual", "capturedBy": "user"}
#: name: the fields of one memory; every content mentions the backup job (one query
#: finds them all) and only KEY_TEXT holds a secret.
MEMORIES: dict[str, dict[str, Any]] = {
    "secret": {"type": "Fact", "content": KEY_TEXT, "tags": ["ops", "aws"]},
    "session": {"type": "Preference", "scope": "session", "sessionId": "S1",
                "content": "The user wants the backup job report in French",
                "metadata": {"origin": "chat", "rank": 2}},
    "project": {"type": "Decision", "scope": "project", "projectId": "P1",
                "tier": "procedural", "sensitivity": "confidential",
                "content": "The backup job runs nightly for project Atlas"},
    "plain": {"type": "Fact", "sensitivity": "public",
              "content": "The backup job keeps its archives in Porto"},
}
COLUMNS = ("tier", "scope", "session_id", "project_id", "sensitivity", "tags", "metadata")


@pytest.fixture
def made(tmp_path: Path, embedder: Embedder) -> dict[str, Any]:
    """A current memory.db with the four memories; their ids and governance."""
    settings = make_settings(tmp_path / "root", "")
    databases = Databases(settings)
    odb = databases.open(ORCH)
    assert odb is not None
    inputs = [validate(MemoryInput, {**fields, "source": MANUAL})
              for fields in MEMORIES.values()]
    result = write_memories(odb, key="w1", task="t", memories=inputs,
                            vectors=list(embedder.encode([m.content for m in inputs])),
                            embedder=embedder.version)
    ids = dict(zip(MEMORIES, result["memoryIds"], strict=True))
    databases.close_all()
    path = odb.workspace.db_path
    before = governance(path)
    assert before[ids["secret"]]["sensitivity"] == "restricted"  # the detector's, on write
    return {"settings": settings, "path": path, "ids": ids, "before": before,
            "workspace": odb.workspace}


def governance(path: Path) -> dict[str, dict[str, Any]]:
    """Every memory's governance columns as the file holds them."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(f"SELECT memory_id, {', '.join(COLUMNS)} FROM main.memories"
                            ).fetchall()
    conn.close()
    return {row[0]: dict(zip(COLUMNS, row[1:], strict=True)) for row in rows}


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                            "'table'")}
    conn.close()
    return names


def cli(settings: Settings, *args: str) -> tuple[int, dict[str, Any]]:
    """``orchmem migrate --orch ORCH <args> --json``: exit code and this orchestrator's
    report."""
    result = CliRunner().invoke(main, ["--root", str(settings.root), "migrate", "--orch",
                                       ORCH, *args, "--json"])
    return result.exit_code, json.loads(result.output)["orchestrators"][ORCH]


def seen(settings: Settings, ids: dict[str, str], view: View = DEFAULT_VIEW) -> set[str]:
    """The names of the memories a reader's recall of "backup job" returns in ``view``."""
    readers = Databases(settings, readonly=True)
    try:
        bundle = recall(ORCH, "backup job", databases=readers, view=view,
                        now=datetime(2030, 1, 1, tzinfo=UTC))
    finally:
        readers.close_all()
    names = {memory_id: name for name, memory_id in ids.items()}
    return {names[n.memory.memory_id] for n in bundle.nodes}


def test_a_downgrade_below_3_is_refused_without_force_naming_what_would_be_lost(
        made: dict[str, Any]) -> None:
    code, report = cli(made["settings"], "--to", "2")
    assert code == 1 and report["status"] == "refused"
    assert "1 restricted and 1 confidential memories" in report["error"]
    assert "2 session or project memories" in report["error"]
    assert "--force" in report["error"] and "AKIA" not in report["error"]
    with sqlite3.connect(made["path"]) as conn:  # nothing changed, no backup taken
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                            ).fetchone() == (str(SCHEMA_VERSION),)
    conn.close()
    assert governance(made["path"]) == made["before"]
    assert list_backups(made["workspace"]) == []
    # above 3 nothing is at stake: no refusal; the check after the steps finds the
    # restricted and the scoped memories by their own words too
    down = cli(made["settings"], "--to", "3")[1]
    assert down["status"] == "downgraded", down


def test_down_to_2_and_up_again_gives_every_memory_its_governance_back(
        made: dict[str, Any]) -> None:
    settings, path, ids = made["settings"], made["path"], made["ids"]
    everything = {"plain", "session", "project"}
    assert seen(settings, ids) == {"plain"}
    assert seen(settings, ids, View(session_id="S1", project_id="P1")) == everything

    code, report = cli(settings, "--to", "2", "--force")
    assert code == 0 and report["status"] == "downgraded", report
    assert "governance_kept" in tables(path)
    # a reader of the downgraded file: the kept governance, not the defaults
    assert seen(settings, ids) == {"plain"}
    assert seen(settings, ids, View(session_id="S1", project_id="P1")) == everything
    assert seen(settings, ids, View(session_id="S2")) == {"plain"}

    code, report = cli(settings)
    assert code == 0 and report["status"] == "migrated", report
    assert governance(path) == made["before"]  # every column of every memory, exactly
    assert "governance_kept" not in tables(path)
    assert seen(settings, ids) == {"plain"}
    assert seen(settings, ids, View(session_id="S1", project_id="P1")) == everything


def test_a_file_an_older_release_left_without_the_side_table_comes_back_restricted(
        made: dict[str, Any]) -> None:
    settings, path, ids = made["settings"], made["path"], made["ids"]
    assert cli(settings, "--to", "2", "--force")[1]["status"] == "downgraded"
    with sqlite3.connect(path) as conn:  # what an older release's own file holds
        conn.execute("DROP TABLE governance_kept")
    conn.close()
    # nothing kept: the reader's defaults, except the secret the detector finds
    assert seen(settings, ids) == {"plain", "session", "project"}

    code, report = cli(settings)
    assert code == 0 and report["status"] == "migrated", report
    after = governance(path)
    assert after[ids["secret"]]["sensitivity"] == "restricted"
    assert {name: (after[m]["sensitivity"], after[m]["scope"]) for name, m in ids.items()
            if name != "secret"} == {name: ("internal", "global") for name in
                                     ("session", "project", "plain")}
    assert "secret" not in seen(settings, ids)


def test_a_memory_an_older_release_wrote_beside_the_kept_ones_is_checked_for_secrets(
        made: dict[str, Any]) -> None:
    settings, path = made["settings"], made["path"]
    assert cli(settings, "--to", "2", "--force")[1]["status"] == "downgraded"
    with sqlite3.connect(path) as conn:  # an older release's writer: no governance
        for memory_id, content in (("m-key", "The deploy token is ghp_" + "a1B2" * 9),
                                   ("m-plain", "The backup job was moved to Lisbon")):
            conn.execute(
                "INSERT INTO memories (memory_id, type, importance, content, summary, "
                "confidence, status, source_type, captured_by, fingerprint, stated, "
                "reinforcements, forgotten, created_at, updated_at) VALUES (?, 'Fact', "
                "50, ?, ?, 0.8, 'active', 'manual', 'user', ?, 0, 0, 0, "
                "'2029-01-01T00:00:00Z', '2029-01-01T00:00:00Z')",
                (memory_id, content, content, f"f-{memory_id}"))
            conn.execute("INSERT INTO memory_sources (memory_id, source_type, captured_by, "
                         "captured_at) VALUES (?, 'manual', 'user', "
                         "'2029-01-01T00:00:00Z')", (memory_id,))
    conn.close()
    code, report = cli(settings)
    assert code == 0 and report["status"] == "migrated", report
    after = governance(path)
    assert {m: after[m] for m in made["before"]} == made["before"]
    assert (after["m-key"]["sensitivity"], after["m-plain"]["sensitivity"]) == (
        "restricted", "internal")
