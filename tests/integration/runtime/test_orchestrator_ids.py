"""orchestratorIds that differ only in case never share a folder.

On macOS and Windows "Bot" opens "bot"'s folder: its database then fails the owner
check and would be quarantined. A new id that equals an existing orchestrator's
folder name but for case is refused, naming both ids; existing databases are untouched.
The write-back task runs in this process (``apply``), through the worker's own open.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings

from orchmem.config import MemoryValidationError, Settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.storage.db.database import Databases
from orchmem.models.writeback.apply import write_memories
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # The task runs in process: no broker is ever contacted.
    return make_settings(tmp_path / "root", "redis://127.0.0.1:1/0")


def seed(settings: Settings, orchestrator_id: str) -> None:
    odb = Databases(settings).open(orchestrator_id)
    assert odb is not None
    memory = validate(MemoryInput, {"type": "Fact", "content": f"{orchestrator_id} was here",
                                    "source": MANUAL})
    write_memories(odb, key=f"seed-{orchestrator_id}", task="t", memories=[memory])
    odb.close()


def write_back(settings: Settings, orchestrator_id: str) -> Any:
    task = create_app(settings).tasks[WRITEBACK]
    payload = {"memories": [{"type": "Fact", "content": "hello", "source": MANUAL}]}
    return task.apply(kwargs={"orchestrator_id": orchestrator_id, "payload": payload}).get(
        propagate=False)


def contents(settings: Settings, orchestrator_id: str) -> list[str]:
    odb = Databases(settings).open(orchestrator_id, create=False)
    assert odb is not None
    try:
        return [row[0] for row in odb.sql("SELECT content FROM memories ORDER BY content")]
    finally:
        odb.close()


def assert_untouched(settings: Settings, orchestrator_id: str) -> None:
    memory = settings.runtime_root(orchestrator_id) / "memory"
    assert not (memory / "DISABLED.json").exists()
    assert not (memory / "quarantine").exists()
    assert contents(settings, orchestrator_id) == [f"{orchestrator_id} was here"]


def test_an_id_differing_only_in_case_from_an_existing_one_is_refused(
        settings: Settings) -> None:
    seed(settings, "bot")
    error = write_back(settings, "Bot")
    assert isinstance(error, MemoryValidationError), error
    assert "'Bot'" in str(error) and "'bot'" in str(error)
    assert error.errors[0]["path"] == "orchestratorId"
    with pytest.raises(MemoryValidationError, match="differs only in case"):
        Databases(settings).open("Bot")
    assert not settings.runtime_root("Bot").exists()
    assert_untouched(settings, "bot")
    assert write_back(settings, "bot")["ok"]


def test_a_case_insensitive_file_system_refuses_the_twin_instead_of_quarantining(
        settings: Settings) -> None:
    seed(settings, "bot")
    # What macOS or Windows do by themselves: "Bot" names the same folder as "bot".
    os.symlink("bot", settings.runtime_root("Bot"))
    error = write_back(settings, "Bot")
    assert isinstance(error, MemoryValidationError), error
    assert "'Bot'" in str(error) and "'bot'" in str(error)
    assert_untouched(settings, "bot")


def test_existing_databases_of_ids_differing_in_case_keep_working(
        settings: Settings, tmp_path: Path) -> None:
    # A Linux deployment may already hold both: only a new database is refused.
    elsewhere = make_settings(tmp_path / "elsewhere", "redis://127.0.0.1:1/0")
    seed(elsewhere, "Bot")
    seed(settings, "bot")
    shutil.move(elsewhere.runtime_root("Bot"), settings.runtime_root("Bot"))
    for orchestrator_id in ("bot", "Bot"):
        assert write_back(settings, orchestrator_id)["ok"]
        assert sorted(contents(settings, orchestrator_id)) == sorted(
            ["hello", f"{orchestrator_id} was here"])
