"""The approximate index file through a real worker: write-backs past a small
``retrieval.ann_threshold`` make it (0600, beside memory.db), recall searches it and says
so, a hard forget erases the forgotten vector from it, ``orchmem check`` finds it
corrupt and ``orchmem rebuild --ann`` makes it again."""

from __future__ import annotations

import json
import stat
from typing import Any

from click.testing import CliRunner
from orchmem_testing import WorkerProcess, settings_env

from orchmem.config import Settings
from orchmem.models.storage.search import ann
from orchmem.worker import MemoryClient
from orchmem.worker.cli.main import main
from orchmem.worker.runtime.app import create_app

ORCH = "ann-worker"
MANUAL = {"sourceType": "manual", "capturedBy": "user"}
FACTS = ["Dana lives in Porto and cycles to work", "The staging database runs PostgreSQL 16",
         "Bruno prefers green tea in the afternoon", "The quarterly report is due on Friday",
         "Alma is learning Rust for the parser", "The offsite is planned for March in Lisbon",
         "Chen reviews every pull request before noon", "The API rate limit is 600 per minute",
         "Emeka bought a standing desk last week", "The security audit found two issues",
         "Farah schedules the retro every second Thursday", "Dark mode ships in the next release"]


def cli(settings: Settings, *args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(main, [*args, "--json"], env=settings_env(settings))
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)  # progress bars go to stderr


def _written(client: MemoryClient, facts: list[str]) -> list[str]:
    handle = client.write_back(memories=[{"type": "Fact", "content": f, "source": MANUAL}
                                         for f in facts])
    assert handle.ok, handle.errors
    result = handle.wait(60)
    assert result is not None and result["ok"], result
    return [str(m) for m in result["memoryIds"]]


def test_past_the_threshold_recall_uses_the_index_file_and_a_hard_forget_erases_from_it(
        isolated: Any) -> None:
    settings = isolated(shards=1, memory={"retrieval": {"ann_threshold": 8}})
    worker = WorkerProcess(settings).start(create_app(settings))
    try:
        client = MemoryClient(ORCH, settings)
        first = _written(client, FACTS[:6])
        workspace = client.databases.workspace(ORCH)
        path, header_path = ann.paths(workspace)
        assert not path.exists()  # 6 vectors: below the threshold
        assert "approximate" not in client.recall("Where does Dana live?").candidates
        _written(client, FACTS[6:])
        assert path.exists() and header_path.exists()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert json.loads(header_path.read_text())["count"] == 12
        dana = first[0]
        bundle = client.recall("Where does Dana live?")
        assert bundle.candidates.get("approximate") == 1
        assert bundle.memory_ids[0] == dana

        odb = client.databases.open(ORCH)
        assert odb is not None
        [(key,)] = odb.sql("SELECT id FROM memories WHERE memory_id = ?", (dana,))
        assert ann.load(path).contains(key)
        forgotten = client.forget(dana, hard=True).wait(60)
        assert forgotten is not None and forgotten["ok"], forgotten
        restored = ann.load(path)
        assert restored is not None and not restored.contains(key) and len(restored) == 11
        after = client.recall("Where does Dana live?")
        assert after.candidates.get("approximate") == 1 and dana not in after.memory_ids

        assert cli(settings, "check")["orchestrators"][ORCH]["status"] == "ok"
        damaged = bytearray(path.read_bytes())
        damaged[len(damaged) // 2] ^= 0xFF
        path.write_bytes(bytes(damaged))
        result = CliRunner().invoke(main, ["check", "--json"], env=settings_env(settings))
        assert result.exit_code == 1, result.output
        entry = json.loads(result.stdout)["orchestrators"][ORCH]
        assert "sha256" in entry["annIndex"] and "rebuild --ann" in entry["message"]
        rebuilt = cli(settings, "rebuild", "--orch", ORCH, "--ann")
        assert rebuilt["annIndex"] == {"index": "usearch", "vectors": 11}
        assert "annIndex" not in cli(settings, "check")["orchestrators"][ORCH]
    finally:
        worker.stop()
