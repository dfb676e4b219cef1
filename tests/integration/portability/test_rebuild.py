"""Rebuilding derived data (FTS, vectors, bulletin) gives the same recall, ranks included,
on a LoCoMo conversation (read from ../shared/bench/data, never copied here)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from orchmem_testing import make_settings

from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.db.stats import stats
from orchmem.models.writeback.apply import write_memories
from orchmem.worker.cli.main import main

LOCOMO = Path(__file__).resolve().parents[4] / "shared" / "bench" / "data" / "locomo7.json"
ORCH = "locomo"
SESSIONS = 4
QUESTIONS = 20


def load_first_conversation(odb: OrchestratorDB, embedder: Embedder) -> list[str]:
    """The turns of conv-26's first sessions as Observations (as benchmarks/locomo.py
    stores them); returns questions of the conversation. (The first sessions only: the
    whole conversation costs minutes on a shared 2-core machine, for no more coverage.)"""
    sample = json.loads(LOCOMO.read_text())[0]
    conv = sample["conversation"]
    memories = []
    sessions = sorted(int(k.split("_")[1]) for k in conv
                      if re.fullmatch(r"session_\d+", k))[:SESSIONS]
    for n in sessions:
        when = datetime.strptime(conv[f"session_{n}_date_time"].strip(),
                                 "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
        for i, turn in enumerate(conv[f"session_{n}"]):
            memories.append(validate(MemoryInput, {
                "type": "Observation", "content": f"{turn['speaker']}: {turn['text']}",
                "createdAt": (when + timedelta(seconds=i)).isoformat(),
                "source": {"sourceType": "channel_transcript", "capturedBy": "system",
                           "conversationId": f"session-{n}"}}))
    vectors = list(embedder.encode([m.content for m in memories]))
    write_memories(odb, key="locomo", task="t", memories=memories, vectors=vectors,
                   embedder=embedder.version)
    return [q["question"] for q in sample["qa"] if q["category"] in (1, 2, 3, 4)][:QUESTIONS]


def answers(databases: Databases, questions: list[str]) -> list[list[tuple[Any, ...]]]:
    now = datetime(2024, 1, 1, tzinfo=UTC)
    return [[(n.memory.memory_id, n.rank, n.scores.vector_rank, n.scores.text_rank)
             for n in recall(ORCH, q, databases=databases, now=now, top_n=10).nodes]
            for q in questions]


@pytest.mark.skipif(not LOCOMO.exists(), reason="the LoCoMo data is not on this machine")
def test_rebuild_gives_identical_recall_ranks_on_a_locomo_conversation(
        tmp_path: Path, embedder: Embedder) -> None:
    settings = make_settings(tmp_path, "")
    odb = Databases(settings).open(ORCH)
    assert odb is not None
    questions = load_first_conversation(odb, embedder)
    before = answers(Databases(settings, readonly=True), questions)
    assert sum(len(a) for a in before) > 100  # ten per question, most of them

    result = CliRunner().invoke(main, ["--root", str(settings.root), "rebuild", "--orch", ORCH,
                                       "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    count = stats(odb)["memories"]
    assert report["fts"]["indexed"] == count
    assert report["vectors"] == {"dropped": count, "embedded": count}
    assert (odb.workspace.bulletins_dir / "latest.json").exists()
    assert stats(odb)["embeddingsMissing"] == 0
    assert answers(Databases(settings, readonly=True), questions) == before
