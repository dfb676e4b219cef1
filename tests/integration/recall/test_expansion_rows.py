"""Query expansion reads its insights' memories through the recall row cache: the same
terms as reading them as nodes, only from memories the view sees, and new words once a
memory's content changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from orchmem_testing import make_settings

from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.recall import expansion
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.search import row_cache
from orchmem.models.storage.visibility import DEFAULT_VIEW, View
from orchmem.models.writeback.apply import write_memories

ORCH = "expander"
QUESTION = "Which port does the billing service use?"


@pytest.fixture
def odb(tmp_path: Path, embedder: Embedder) -> OrchestratorDB:
    opened = Databases(make_settings(tmp_path, "")).open(ORCH)
    assert opened is not None
    texts = ["The billing service runs on port 8080 behind nginx",
             "The billing service now runs on port 9090 behind envoy"]
    result = write_memories(opened, key="ports", task="test", memories=[
        validate(MemoryInput, {"type": "Fact", "content": t, "source": {
            "sourceType": "manual", "capturedBy": "user"}}) for t in texts],
        vectors=list(embedder.encode(texts)), embedder=embedder.version)
    ids = result["memoryIds"]
    with opened.write():
        opened.sql("INSERT INTO insights (insight_id, kind, status, memory_ids, ref, reason, "
                   "created_at, updated_at) VALUES ('i-1', 'conflict', 'open', ?, NULL, NULL, "
                   "'2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')",
                   (f'["{ids[1]}", "{ids[0]}"]',))
    return opened


def both(odb: OrchestratorDB, view: View, monkeypatch: pytest.MonkeyPatch
         ) -> tuple[object, object]:
    """expand() through the row cache (twice: the second from what the first cached),
    and without a cache (the nodes read as before); all three must agree."""
    cached, again = (expansion.expand(odb, QUESTION, view, 6) for _ in range(2))
    with monkeypatch.context() as patch:
        patch.setattr(row_cache, "current", lambda odb: None)
        plain = expansion.expand(odb, QUESTION, view, 6)
    assert cached == again
    return cached, plain


def test_the_cached_words_give_the_same_expansion(odb: OrchestratorDB,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cached, plain = both(odb, DEFAULT_VIEW, monkeypatch)
    assert cached == plain
    text, added = cached  # type: ignore[misc]
    assert added is not None and {"9090", "envoy"} <= set(added["terms"])
    assert text.startswith(QUESTION)


def test_a_memory_the_view_does_not_see_expands_nothing(odb: OrchestratorDB,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    both(odb, DEFAULT_VIEW, monkeypatch)  # the words of both memories now cached
    with odb.write():
        odb.sql("UPDATE memories SET sensitivity = 'restricted' WHERE content LIKE '%envoy%'")
    cached, plain = both(odb, DEFAULT_VIEW, monkeypatch)
    assert cached == plain == (QUESTION, None)
    seen_all, plain_all = both(odb, View(include_restricted=True), monkeypatch)
    assert seen_all == plain_all and seen_all[1] is not None  # type: ignore[index]


def test_changed_content_gives_new_words(odb: OrchestratorDB,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    both(odb, DEFAULT_VIEW, monkeypatch)
    with odb.write():
        odb.sql("UPDATE memories SET content = 'The billing service now runs on port 9090 "
                "behind traefik' WHERE content LIKE '%envoy%'")
    cached, plain = both(odb, DEFAULT_VIEW, monkeypatch)
    assert cached == plain
    terms = cached[1]["terms"]  # type: ignore[index]
    assert "traefik" in terms and "envoy" not in terms
