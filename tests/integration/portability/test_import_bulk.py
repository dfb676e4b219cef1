"""The import's bulk path writes what the row-by-row path writes: the same ids, rows,
full-text hits, vectors, provenance and audit; its triggers come back as they were; and
a process killed right after the import returned leaves all of it on disk."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memory_seed import seed
from orchmem_testing import make_settings

from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.portability import import_files, importer
from orchmem.models.portability.export import export_jsonl
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.memories import portable
from orchmem.models.writeback.apply import write_memories

ORCH = "porter"
#: Columns written at import time (they differ between two imports of one folder).
_CLOCK = {"memory_embeddings": "updated_at"}
_QUERIES = ("office", "user", "sqlite", "launch", "migration", "porto OR river", "answers")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    root = tmp_path_factory.mktemp("bulk")
    odb = Databases(make_settings(root / "a", "")).open(ORCH)
    assert odb is not None
    seed(odb, embedder)
    export_jsonl(odb, root / "out", include_vectors=True)
    return root / "out"


@contextlib.contextmanager
def row_by_row(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The import with every line checked on its own and every trigger firing per row."""
    with monkeypatch.context() as patch:
        patch.setattr(portable, "deferred_triggers", lambda odb: contextlib.nullcontext())
        patch.setattr(import_files, "rows_ok", lambda *args: False)
        patch.setattr(import_files, "vectors_at_once", lambda *args: None)
        yield


def target(root: Path, embedder: Embedder, existing: bool) -> OrchestratorDB:
    databases = Databases(make_settings(root, ""))
    odb = databases.open(ORCH)
    assert odb is not None
    if existing:  # memories already there: the full-text range must start after them
        texts = ["A note written before the import about the harbour",
                 "Another older note about the office plants"]
        write_memories(odb, key="before", task="test", memories=[
            validate(MemoryInput, {"type": "Fact", "content": t, "source": {
                "sourceType": "manual", "capturedBy": "user"}}) for t in texts],
            vectors=list(embedder.encode(texts)), embedder=embedder.version)
    return odb


def twins(tmp_path: Path, embedder: Embedder, existing: bool
          ) -> tuple[OrchestratorDB, OrchestratorDB]:
    """Two targets holding the same rows (one file, copied)."""
    first = target(tmp_path / "first", embedder, existing)
    first.close()
    shutil.copytree(tmp_path / "first", tmp_path / "second")
    second = Databases(make_settings(tmp_path / "second", "")).open(ORCH)
    again = Databases(make_settings(tmp_path / "first", "")).open(ORCH)
    assert second is not None and again is not None
    return again, second


def contents(odb: OrchestratorDB) -> dict[str, Any]:
    """Every table an import writes, the full-text hits and the triggers."""
    out: dict[str, Any] = {}
    with odb.read():
        for table in ("memories", "memory_sources", "memory_edges", "memory_event_ids",
                      "memory_embeddings"):
            names = [r[1] for r in odb.sql(f"PRAGMA table_info({table})")
                     if r[1] != _CLOCK.get(table)]
            listed = ", ".join(names)
            out[table] = odb.sql(f"SELECT {listed} FROM {table} ORDER BY {listed}")
        events = odb.sql("SELECT id, op, memory_ids, before, after, reason, actor, "
                         "idempotency_key, at FROM memory_events ORDER BY id")
        out["memory_events"] = [e if e[1] != "import" else e[:5] for e in events]
        out["fts"] = {q: odb.sql("SELECT rowid, bm25(memory_fts) FROM memory_fts WHERE "
                                 "memory_fts MATCH ? ORDER BY rowid", (q,)) for q in _QUERIES}
        out["fts_rows"] = odb.sql("SELECT count(*) FROM memory_fts")
        out["triggers"] = odb.sql("SELECT name, sql FROM sqlite_master WHERE type = "
                                  "'trigger' ORDER BY name")
    with odb.write():  # raises when the full-text index does not match the rows
        odb.sql("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")
    return out


@pytest.mark.parametrize("existing", [False, True], ids=["fresh", "with-memories"])
def test_the_bulk_path_writes_what_the_row_by_row_path_writes(
        tmp_path: Path, exported: Path, embedder: Embedder, existing: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    bulk, slow = twins(tmp_path, embedder, existing)
    seq = {name: int(o.sql("SELECT value FROM meta WHERE key = 'rows_seq'")[0][0])
           for name, o in (("bulk", bulk), ("slow", slow))}
    fast_report = importer.import_folder(bulk, exported, embedder=embedder, batch_size=64)
    with row_by_row(monkeypatch):
        slow_report = importer.import_folder(slow, exported, embedder=embedder, batch_size=64)
    assert fast_report["written"] == slow_report["written"]
    assert fast_report["written"]["records"] > 5 and fast_report["vectorsFromFile"] > 5
    got, want = contents(bulk), contents(slow)
    assert got == want
    # rows_seq starts at a random value per file: how far each import moved it
    moved = {name: int(o.sql("SELECT value FROM meta WHERE key = 'rows_seq'")[0][0]) - start
             for (name, start), o in zip(seq.items(), (bulk, slow), strict=True)}
    assert moved["bulk"] == moved["slow"] > 0
    assert all(got["fts"][q] for q in ("office", "user"))
    assert {name for name, _ in got["triggers"]} >= set(portable._DEFERRED)


def test_an_error_inside_the_bulk_block_leaves_the_triggers(
        tmp_path: Path, exported: Path, embedder: Embedder,
        monkeypatch: pytest.MonkeyPatch) -> None:
    odb = target(tmp_path / "t", embedder, existing=False)
    before = contents(odb)

    insert = portable.insert

    def broken(odb: OrchestratorDB, kind: str, lines: Any) -> int:
        if kind == "edges":  # after the records and sources went in, triggers dropped
            assert odb.sql("SELECT count(*) FROM sqlite_master WHERE name = "
                           "'memories_fts_insert'") == [(0,)]
            raise sqlite3.OperationalError("disk I/O error")
        return insert(odb, kind, lines)

    monkeypatch.setattr(portable, "insert", broken)
    with pytest.raises(Exception, match="disk"):
        importer.import_folder(odb, exported, embedder=embedder, batch_size=64)
    assert contents(odb) == before  # rolled back: no rows, every trigger in place


_KILLED_AFTER_IMPORT = """
import os, signal, sys
from pathlib import Path
from orchmem_testing import make_settings
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.portability.importer import import_folder
from orchmem.models.storage.db.database import Databases
settings = make_settings(Path(sys.argv[1]), "")
odb = Databases(settings).open("porter")
report = import_folder(odb, Path(sys.argv[2]), embedder=get_embedder(settings.embedding),
                       batch_size=64)
print(report["written"]["records"], flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint
"""


def test_an_import_survives_a_kill_right_after_it_returns(
        tmp_path: Path, exported: Path, embedder: Embedder,
        monkeypatch: pytest.MonkeyPatch) -> None:
    support = Path(__file__).parents[2] / "support"
    done = subprocess.run([sys.executable, "-c", _KILLED_AFTER_IMPORT, str(tmp_path / "k"),
                           str(exported)], capture_output=True, text=True, check=False,
                          env={**_env(), "PYTHONPATH": str(support)})
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    written = int(done.stdout.split()[0])
    killed = Databases(make_settings(tmp_path / "k", "")).open(ORCH)
    assert killed is not None
    assert killed.sql("PRAGMA integrity_check") == [("ok",)]
    reference = target(tmp_path / "ref", embedder, existing=False)
    with row_by_row(monkeypatch):
        importer.import_folder(reference, exported, embedder=embedder, batch_size=64)
    got, want = contents(killed), contents(reference)
    assert got == want and len(got["memories"]) == written > 5



def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
