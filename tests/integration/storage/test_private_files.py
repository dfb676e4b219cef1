"""Every file orchmem writes is 0600 and every folder 0700, even under umask 022.

The in-process client (``immediate=True``), a real worker with its outbox, backups,
exports, bulletins, ingest and the embedded broker all write real files under a
permissive umask; the tree is then walked. ``orchmem check`` reports entries others
could read (exit 1) and ``orchmem check --fix`` narrows them.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from orchmem_testing import (
    WorkerProcess,
    free_port,
    make_settings,
    settings_env,
    unique_id,
    wait_until,
)

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.portability.export import export_jsonl, export_markdown
from orchmem.models.storage.db.backup import take_backup
from orchmem.models.storage.db.database import Databases
from orchmem.worker import MemoryClient
from orchmem.worker.cli import main
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.broker import EmbeddedRedis


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """Umask 022: what is not created with an explicit mode comes out 0644 / 0755."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(top: Path) -> dict[str, int]:
    """Mode of every entry at or below ``top`` (links excluded), by relative path."""
    found = {".": stat.S_IMODE(top.lstat().st_mode)}
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            path = Path(folder) / name
            if not path.is_symlink():
                found[path.relative_to(top).as_posix()] = stat.S_IMODE(path.lstat().st_mode)
    return found


def assert_private(top: Path) -> dict[str, int]:
    """Every folder at or below ``top`` is 0700 and every file 0600; returns the modes."""
    found = modes(top)
    wrong = {p: f"{m:04o}" for p, m in found.items()
             if m != (0o700 if (top / p).is_dir() else 0o600)}
    assert wrong == {}
    return found


def _memory(content: str, memory_type: str = "Preference") -> dict[str, Any]:
    return {"type": memory_type, "content": content, "importance": 60,
            "source": {"sourceType": "manual", "capturedBy": "user"}}


def _offline(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0",
                         memory={"ingest": {"min_file_age_s": 0}})


def test_the_immediate_client_backups_exports_and_ingest_write_only_private_files(
        tmp_path: Path, embedder: Embedder) -> None:
    settings = _offline(tmp_path)
    orch = unique_id("private")
    client = MemoryClient(orch, settings, immediate=True)
    written = client.write_back(memories=[_memory("The user prefers green tea"),
                                          _memory("Ship the billing migration", "Goal")])
    assert written.ok and written.wait()["ok"]
    assert client.bulletin().source == "live"
    assert client.reflect().wait() is not None
    memory = settings.runtime_root(orch) / "memory"
    dropped = memory / "ingest" / "notes.md"
    dropped.write_text("# Notes\n\nThe user's dog is called Biscuit.\n")  # 0644, as dropped
    assert client.ingest_now().wait()["ok"]
    odb = Databases(settings).open(orch, create=False)
    assert odb is not None
    take_backup(odb, "manual")
    export_jsonl(odb, tmp_path / "root" / "exports" / "jsonl")
    export_markdown(odb, tmp_path / "root" / "exports" / "md")
    client.close()

    found = assert_private(tmp_path / "root")
    prefix = f"orchestrators/{orch}/memory/"
    expected = ["memory.db", "memory.db-wal", "memory.db-shm", "logs/memory.log",
                "bulletins/latest.json", "bulletins/latest.md", "bulletins/working.md",
                "ingest/processed", "backups"]
    assert [name for name in expected if prefix + name not in found] == []
    assert any(p.startswith(prefix + "ingest/processed/") for p in found)
    assert any(p.startswith(prefix + "backups/memory-") for p in found)
    assert {"exports/jsonl/manifest.toml", "exports/jsonl/records.jsonl",
            "exports/md/memories.md"} <= set(found)


def test_a_worker_and_its_client_write_only_private_files(
        isolated: Any, embedder: Embedder) -> None:
    settings = isolated()
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        client = MemoryClient(unique_id("private-worker"), settings)
        handle = client.write_back(memories=[_memory("The user works from Lisbon")])
        assert handle.wait(60)["ok"]
        assert client.bulletin(60).text
        client.close()
    finally:
        worker.stop()
    found = assert_private(settings.root)
    memory = f"orchestrators/{client.orchestrator_id}/memory/"
    assert {memory + "memory.db", memory + "outbox.db", memory + "bulletins/latest.json"} \
        <= set(found)
    assert any(p.startswith("logs/test-worker-") for p in found)


def test_the_embedded_broker_keeps_its_aof_rdb_and_log_private(isolated: Any) -> None:
    settings = isolated(broker_url="")
    broker = EmbeddedRedis.start(settings)
    try:
        client = redis.Redis(host="127.0.0.1", port=broker.port, password=broker.password)
        client.lpush("memory.0", "a task body")
        client.bgsave()
        wait_until(lambda: (settings.broker_dir / "dump.rdb").exists(), 30, message="rdb")
        client.bgrewriteaof()
        wait_until(lambda: client.info("persistence")["aof_rewrite_in_progress"] == 0
                   and client.info("persistence")["rdb_bgsave_in_progress"] == 0,
                   30, message="rewrite")
        client.close()
    finally:
        broker.stop()
    found = assert_private(settings.broker_dir)
    assert {"appendonly.aof", "dump.rdb", "redis.log", "redis.conf", "password"} <= set(found)


def _check(settings: Settings, *args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, ["check", "--json", *args], env=settings_env(settings))
    return result.exit_code, json.loads(result.output)


def test_check_reports_wide_modes_by_relative_path_and_fix_repairs_them(
        tmp_path: Path, embedder: Embedder) -> None:
    outside = tmp_path / "elsewhere"
    settings = make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0",
                             orchestrators={"ext": {"runtime_root": str(outside)}})
    inside = unique_id("private-check")
    for orch in (inside, "ext"):
        client = MemoryClient(orch, settings, immediate=True)
        assert client.write_back(memories=[_memory("The user likes jazz")]).wait()["ok"]
        client.close()
    memory = settings.runtime_root(inside) / "memory"
    code, report = _check(settings)
    assert (code, report["ok"], report["wideModes"]) == (0, True, [])

    (memory / "memory.db").chmod(0o644)
    (memory / "logs").chmod(0o755)
    (outside / "memory" / "memory.db").chmod(0o640)
    code, report = _check(settings)
    assert code == 1 and report["ok"] is False
    assert report["orchestrators"][inside]["status"] == "ok"
    assert sorted(report["wideModes"], key=lambda w: w["path"]) == [
        {"path": "ext:memory/memory.db", "mode": "0640"},
        {"path": f"orchestrators/{inside}/memory/logs", "mode": "0755"},
        {"path": f"orchestrators/{inside}/memory/memory.db", "mode": "0644"}]
    assert str(tmp_path) not in json.dumps(report["wideModes"])

    code, report = _check(settings, "--fix")
    assert (code, report["ok"], report["fixed"], report["wideModes"]) == (0, True, 3, [])
    assert_private(settings.root)
    assert_private(outside / "memory")
    code, report = _check(settings)
    assert (code, report["wideModes"]) == (0, [])
    text = CliRunner().invoke(main, ["check"], env=settings_env(settings))
    assert text.exit_code == 0 and "files private (0600 / 0700)" in text.output
