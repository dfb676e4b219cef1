"""Ingest survives a crash at every step: each file ends ingested exactly once, and moved."""

from __future__ import annotations

import contextlib
import json
import os
import random
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from orchmem_testing import make_settings

from orchmem.models.ingest import outcomes as ingest_moves_module
from orchmem.models.ingest import scan as ingest_module
from orchmem.models.ingest.scan import scan
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.delivery import receipts as receipts_module
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.writeback import apply as writeback_module


class Crash(BaseException):
    """Stands for the process dying: not an Exception, so nothing catches it."""


@pytest.fixture
def odb(tmp_path: Path) -> OrchestratorDB:
    settings = make_settings(tmp_path, "", memory={"ingest": {"min_file_age_s": 0}})
    handle = Databases(settings).open("crashy")
    assert handle is not None
    return handle



def drop(odb: OrchestratorDB) -> dict[str, str]:
    files = {"a.md": "## Decisions\n- Adopt trunk-based development\n- Review PRs within a day\n",
             "b.txt": "I prefer async standups.\n\nRemind me to order the new laptops.\n",
             "c.json": json.dumps([{"type": "Fact", "content": "The budget is 40k"}])}
    for name, text in files.items():
        (odb.workspace.ingest_dir / name).write_text(text)
    return files


def contents(odb: OrchestratorDB) -> list[str]:
    return sorted(n.content for n in list_memories(odb, limit=1000))


def assert_ingested_once(odb: OrchestratorDB, result: dict[str, Any]) -> None:
    assert sorted(p.name for p in odb.workspace.ingest_dir.iterdir() if p.is_file()) == []
    assert sorted(p.name for p in odb.workspace.processed_dir.iterdir()) == [
        "a.md", "b.txt", "c.json"]
    assert contents(odb) == sorted([
        "Adopt trunk-based development", "Review PRs within a day", "I prefer async standups.",
        "Remind me to order the new laptops.", "The budget is 40k"])
    with odb.bound():
        rows = odb.db.execute_sql("SELECT outcome, moved FROM ingest_manifest").fetchall()
        assert odb.db.execute_sql("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert sorted(rows) == [("ingested", 1)] * 3


def test_crash_inside_the_commit_leaves_nothing_and_the_next_scan_ingests_once(
        odb: OrchestratorDB, embed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    drop(odb)
    real = writeback_module.store_embeddings

    def dies_mid_transaction(*args: Any, **kwargs: Any) -> int:
        real(*args, **kwargs)
        raise Crash()

    monkeypatch.setattr(writeback_module, "store_embeddings", dies_mid_transaction)
    with pytest.raises(Crash):
        scan(odb, embed, "test")
    assert contents(odb) == []  # the transaction rolled back: no memory, no manifest
    with odb.bound():
        assert odb.db.execute_sql("SELECT count(*) FROM ingest_manifest").fetchone()[0] == 0
        assert odb.db.execute_sql("SELECT count(*) FROM memory_fts").fetchone()[0] == 0
    monkeypatch.setattr(writeback_module, "store_embeddings", real)
    assert_ingested_once(odb, scan(odb, embed, "test"))


def test_crash_after_the_commit_before_the_move_is_repaired(
        odb: OrchestratorDB, embed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    drop(odb)
    real = ingest_module.move_to_processed
    calls = []

    def dies_on_second_move(*args: Any, **kwargs: Any) -> Path:
        calls.append(args[1].name)
        if len(calls) == 2:
            raise Crash()
        return real(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "move_to_processed", dies_on_second_move)
    with pytest.raises(Crash):
        scan(odb, embed, "test")
    assert calls == ["a.md", "b.txt"]
    # The scan committed its three files together: b and c are committed, not moved.
    assert (odb.workspace.inflight_dir / "b.txt").exists()
    assert (odb.workspace.inflight_dir / "c.json").exists()
    monkeypatch.setattr(ingest_module, "move_to_processed", real)
    result = scan(odb, embed, "test")
    outcomes = {f["file"]: f["outcome"] for f in result["files"]}
    assert outcomes == {"b.txt": "repaired", "c.json": "repaired"}
    assert_ingested_once(odb, result)


def test_crash_after_the_move_before_it_is_marked_changes_nothing(
        odb: OrchestratorDB, embed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    drop(odb)
    real = ingest_module.mark_moved

    def dies_before_marking(*args: Any, **kwargs: Any) -> None:
        raise Crash()

    monkeypatch.setattr(ingest_module, "mark_moved", dies_before_marking)
    with pytest.raises(Crash):
        scan(odb, embed, "test")
    # One commit for the scan's files, every file moved, no row marked moved yet.
    assert len(contents(odb)) == 5
    assert sorted(p.name for p in odb.workspace.processed_dir.iterdir()) == [
        "a.md", "b.txt", "c.json"]
    monkeypatch.setattr(ingest_module, "mark_moved", real)
    result = scan(odb, embed, "test")
    assert result["files"] == []  # nothing is redone: the rows are marked moved
    assert_ingested_once(odb, result)


def test_crash_while_rejecting_is_finished_by_the_next_scan(
        odb: OrchestratorDB, embed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (odb.workspace.ingest_dir / "bad.json").write_text("{not json")
    real = ingest_module.move_to_rejected
    monkeypatch.setattr(ingest_module, "move_to_rejected",
                        lambda *a, **k: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        scan(odb, embed, "test")
    monkeypatch.setattr(ingest_module, "move_to_rejected", real)
    result = scan(odb, embed, "test")
    assert result["files"][0]["reason"] == "invalid_json"
    assert (odb.workspace.rejected_dir / "bad.json.reason.json").exists()
    assert not (odb.workspace.ingest_dir / "bad.json").exists()


class OsDyingOnFileMove(ModuleType):
    """``os`` as the module moving ingest files sees it, dying when a file (not its reason)
    is moved."""

    def __init__(self) -> None:
        super().__init__("os")

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def replace(self, src: Any, dst: Any) -> None:
        if not str(dst).endswith(".reason.json"):
            raise Crash()
        os.replace(src, dst)


def test_crash_between_the_reason_file_and_the_move_overwrites_nothing(
        odb: OrchestratorDB, embed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (odb.workspace.ingest_dir / "bad.json").write_text("{not json")
    monkeypatch.setattr(ingest_moves_module, "os", OsDyingOnFileMove())
    with pytest.raises(Crash):
        scan(odb, embed, "test")
    rejected = odb.workspace.rejected_dir
    assert os.listdir(rejected) == ["bad.json.reason.json"]  # written, its file not moved
    first = (rejected / "bad.json.reason.json").read_text()
    monkeypatch.undo()
    [outcome] = scan(odb, embed, "test")["files"]
    assert outcome["reason"] == "invalid_json"
    moved = f"bad.{outcome['sha256'][:12]}.json"
    assert sorted(os.listdir(rejected)) == sorted(
        ["bad.json.reason.json", moved, f"{moved}.reason.json"])
    assert (rejected / "bad.json.reason.json").read_text() == first
    assert (rejected / moved).read_text() == "{not json"
    assert not (odb.workspace.ingest_dir / "bad.json").exists()


def test_random_crash_points_always_end_exactly_once(
        odb: OrchestratorDB, embed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    drop(odb)
    rng = random.Random(3)
    targets = [(writeback_module, "store_embeddings"), (receipts_module, "finish"),
               (ingest_module, "move_to_processed"), (ingest_module, "mark_moved"),
               (ingest_module, "record_outcome")]
    for _ in range(12):
        module, name = rng.choice(targets)
        real = getattr(module, name)
        budget = [rng.randint(0, 2)]

        def flaky(*args: Any, _real: Any = real, _budget: list[int] = budget,
                  **kwargs: Any) -> Any:
            if _budget[0] == 0:
                raise Crash()
            _budget[0] -= 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, flaky)
        with contextlib.suppress(Crash):
            scan(odb, embed, "test")
        monkeypatch.setattr(module, name, real)
    assert_ingested_once(odb, scan(odb, embed, "test"))


def test_a_newer_file_dropped_under_the_name_of_one_not_yet_moved_is_kept_apart(
        odb: OrchestratorDB, embed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = odb.workspace.ingest_dir
    (ingest / "a.md").write_text("I prefer green tea.")

    def newer_file_dropped_then_dies(*args: Any, **kwargs: Any) -> Path:
        (ingest / ".a.md.tmp").write_text("I prefer oolong tea.")
        os.replace(ingest / ".a.md.tmp", ingest / "a.md")
        raise Crash()

    monkeypatch.setattr(ingest_module, "move_to_processed", newer_file_dropped_then_dies)
    with pytest.raises(Crash):
        scan(odb, embed, "test")
    monkeypatch.undo()
    result = scan(odb, embed, "test")
    assert [(f["file"], f["outcome"]) for f in result["files"]] == [
        ("a.md", "repaired"), ("a.md", "ingested")]
    assert sorted(p.read_text() for p in odb.workspace.processed_dir.iterdir()) == [
        "I prefer green tea.", "I prefer oolong tea."]
    assert contents(odb) == ["I prefer green tea.", "I prefer oolong tea."]
    with odb.bound():
        rows = odb.db.execute_sql("SELECT outcome, moved FROM ingest_manifest").fetchall()
    assert rows == [("ingested", 1)] * 2


def test_a_scan_embeds_its_new_files_once_and_commits_them_together_each_with_its_outcome(
        odb: OrchestratorDB, embed: Any) -> None:
    files = drop(odb)
    ingest = odb.workspace.ingest_dir
    (ingest / "d.txt").write_text(files["b.txt"])  # b's content again, in the same scan
    # An edge to a memory this orchestrator lacks: rejected at its commit, alone.
    (ingest / "e.json").write_text(json.dumps({
        "memories": [{"type": "Fact", "content": "The office opens at nine", "key": "o"}],
        "edges": [{"fromMemoryId": "o", "toMemoryId": "m-00000000-0000000000000000",
                   "edgeType": "RelatedTo", "weight": 0.5}]}))
    calls: list[int] = []

    def counted(items: list[Any]) -> Any:
        calls.append(len(items))
        return embed(items)

    transactions: list[list[str]] = []

    def traced(statement: str) -> None:
        if statement.startswith("BEGIN"):
            transactions.append([])
        elif transactions:
            transactions[-1].append(statement)

    odb.db.connection().set_trace_callback(traced)
    try:
        result = scan(odb, counted, "test")
    finally:
        odb.db.connection().set_trace_callback(None)
    outcomes = {f["file"]: (f["outcome"], f.get("reason")) for f in result["files"]}
    assert outcomes == {"a.md": ("ingested", None), "b.txt": ("ingested", None),
                        "c.json": ("ingested", None), "d.txt": ("duplicate", "duplicate"),
                        "e.json": ("rejected", "scope_violation")}
    # a, b and c in one model call and one transaction; d (b's content) made the scan
    # commit them before it was looked at; e alone at the end.
    assert calls == [5, 1]
    writing = [t for t in transactions
               if any(s.startswith('INSERT INTO memories') for s in t)]
    assert len(writing) == 2
    assert sum('"ingest_manifest"' in s for s in writing[0]) == 3  # a, b and c
    assert contents(odb) == sorted([
        "Adopt trunk-based development", "Review PRs within a day", "I prefer async standups.",
        "Remind me to order the new laptops.", "The budget is 40k"])
    with odb.bound():
        rows = odb.db.execute_sql(
            "SELECT file_name, outcome, moved FROM ingest_manifest ORDER BY id").fetchall()
    assert sorted(rows) == [("a.md", "ingested", 1), ("b.txt", "ingested", 1),
                            ("c.json", "ingested", 1), ("d.txt", "duplicate", 1),
                            ("e.json", "rejected", 1)]
