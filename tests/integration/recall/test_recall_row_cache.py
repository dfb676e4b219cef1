"""Recall's row cache (models/storage/search/row_cache.py) on real SQLite files and the real
MiniLM model: the same answers as the reads it replaces, another process's writes seen
by the next recall, nothing of a hard-forgotten memory left in it, and a file written
before the change counter (schema 6) recalled correctly with no cache."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from memory_seed import CONTENTS, as_schema, seed
from orchmem_testing import make_settings, settings_env

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.edits import Forget, apply_edit
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.search import row_cache

NOW = datetime(2027, 1, 1, tzinfo=UTC)
ORCH = "rows"
QUESTIONS = ["Where is the office?", "What does the user prefer?", "What did we decide?",
             "the user's name", "When is version two due?", "migration guide",
             "Builds on Mondays", "zebra quantum submarine"]


def _settings(root: Path) -> Settings:
    return make_settings(root, "", embedding={"query_cache_size": 0})


def _answer(bundle: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = bundle.dump()
    dumped.pop("tookMs")
    return dumped


def _answers(databases: Databases, **kwargs: Any) -> list[dict[str, Any]]:
    return [_answer(recall(ORCH, q, databases=databases, now=NOW, route=route,
                           include_inactive=inactive, **kwargs))
            for q in QUESTIONS for route in (True, False) for inactive in (False, True)]


def _held(odb: OrchestratorDB) -> row_cache.RowCache | None:
    held = odb.cache.get("row_cache")
    return held if isinstance(held, row_cache.RowCache) else None


def test_cached_recalls_answer_as_the_reads_without_the_cache(
        tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    databases = Databases(_settings(tmp_path))
    odb = databases.open(ORCH)
    seed(odb, embedder)  # every type, edges, sources, a supersede, a retract, a forget
    cold = _answers(databases)
    held = _held(odb)
    assert held is not None and held.rows and held.edges and held.sources and held.nodes
    # What is made of the rows once: substance, edges, sources and the bundle's records.
    assert all(held.derived.get(name) for name in ("kind", "edge", "captured", "records"))
    warm = _answers(databases)  # from the filled cache
    monkeypatch.setattr(row_cache, "current", lambda odb: None)
    without = _answers(databases)
    assert cold == without and warm == without
    databases.close_all()


def test_a_cache_past_its_bound_starts_again_and_answers_alike(
        tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    databases = Databases(_settings(tmp_path))
    seed(databases.open(ORCH), embedder)
    monkeypatch.setattr(row_cache, "current", lambda odb: None)
    without = _answers(databases)
    monkeypatch.undo()
    monkeypatch.setattr(row_cache, "MAX_MEMORIES", 2)  # cleared on almost every read
    assert _answers(databases) == without
    databases.close_all()


def test_a_bundle_s_lists_are_its_own(tmp_path: Path, embedder: Embedder) -> None:
    """Records made once are shared by bundles, the lists holding them are not: a caller
    changing one bundle's provenance changes no other answer."""
    databases = Databases(_settings(tmp_path))
    seed(databases.open(ORCH), embedder)
    first = recall(ORCH, "Where is the office?", databases=databases, now=NOW)
    expected = _answer(recall(ORCH, "Where is the office?", databases=databases, now=NOW))
    assert any(p.sources for p in first.provenance)
    for provenance in first.provenance:
        provenance.sources.clear()
    assert _answer(recall(ORCH, "Where is the office?", databases=databases, now=NOW)) == expected
    databases.close_all()


def _elsewhere(settings: Settings, edits: str) -> None:
    """Run ``edits`` (apply_edit calls on ``odb``) in another process, as the worker would."""
    script = ("from orchmem.config import load_settings\n"
              "from orchmem.models.governance.edits import Forget, Link, Retract, apply_edit\n"
              "from orchmem.models.storage.db.database import Databases\n"
              f"odb = Databases(load_settings()).open({ORCH!r})\n{edits}")
    subprocess.run([sys.executable, "-c", script], env=settings_env(settings), check=True,
                   timeout=120)


def test_another_process_s_writes_are_seen_by_the_next_recall(
        tmp_path: Path, embedder: Embedder) -> None:
    settings = _settings(tmp_path)
    databases = Databases(settings)
    odb = databases.open(ORCH)
    ids = seed(odb, embedder)
    office = recall(ORCH, "Where is the office?", databases=databases, now=NOW)
    assert ids["Fact"] in office.memory_ids
    assert _held(odb) is not None
    _elsewhere(settings, (
        f"apply_edit(odb, Retract(op='retract', memory_id={ids['Fact']!r}, reason='moved'),\n"
        "           key='r', task='t')\n"
        f"apply_edit(odb, Link(op='link', from_memory_id={ids['Goal']!r},\n"
        f"                     to_memory_id={ids['Decision']!r}, edge_type='RelatedTo',\n"
        "                     reason='x'), key='l', task='t')\n"))
    after = recall(ORCH, "Where is the office?", databases=databases, now=NOW)
    assert ids["Fact"] not in after.memory_ids
    inactive = recall(ORCH, "Where is the office?", databases=databases, now=NOW,
                      include_inactive=True)
    statuses = {n.memory.memory_id: n.memory.status.value for n in inactive.nodes}
    assert statuses.get(ids["Fact"]) == "retracted"
    goal = recall(ORCH, CONTENTS["Goal"], databases=databases, now=NOW)
    linked = {(e.from_memory_id, e.to_memory_id) for e in goal.edges}
    assert (ids["Goal"], ids["Decision"]) in linked
    databases.close_all()


def _holds(held: row_cache.RowCache | None, memory_id: str, content: str) -> bool:
    if held is None:
        return False
    text = repr((held.rows, held.edges, held.sources, held.nodes, held.derived))
    entry = held.rows.get(memory_id)
    return content in text or (entry is not None and not entry[1]) \
        or bool(held.edges.get(memory_id)) or bool(held.sources.get(memory_id))


@pytest.mark.parametrize("where", ["here", "another process"])
def test_a_hard_forget_leaves_nothing_of_the_memory_in_the_cache(
        tmp_path: Path, embedder: Embedder, where: str) -> None:
    """Here: dropped at once. Another process: the counter moved, so the next recall
    here drops the old cache."""
    settings = _settings(tmp_path)
    databases = Databases(settings)
    odb = databases.open(ORCH)
    ids = seed(odb, embedder)
    gone = ids["Goal"]
    found = recall(ORCH, CONTENTS["Goal"], databases=databases, now=NOW)
    assert gone in found.memory_ids and _holds(_held(odb), gone, CONTENTS["Goal"])
    if where == "here":
        apply_edit(odb, Forget(op="forget", memory_id=gone, hard=True), key="f", task="t")
        assert not _holds(_held(odb), gone, CONTENTS["Goal"])
    else:
        _elsewhere(settings, f"apply_edit(odb, Forget(op='forget', memory_id={gone!r}, "
                             "hard=True), key='f', task='t')\n")
    again = recall(ORCH, CONTENTS["Goal"], databases=databases, now=NOW)
    assert gone not in again.memory_ids
    assert not _holds(_held(odb), gone, CONTENTS["Goal"])
    databases.close_all()


def test_a_file_without_the_counter_is_recalled_alike_with_no_cache(
        tmp_path: Path, embedder: Embedder) -> None:
    settings = _settings(tmp_path)
    databases = Databases(settings)
    seed(databases.open(ORCH), embedder)
    current = _answers(databases)
    databases.close_all()
    as_schema(settings, ORCH, 6)  # the file the previous release wrote
    reader = Databases(settings, readonly=True)  # a reader never migrates
    old = reader.open(ORCH, create=False)
    assert old is not None and old.meta("rows_seq") is None
    assert _answers(reader) == current
    assert _held(old) is None
    reader.close_all()
