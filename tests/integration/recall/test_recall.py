"""Hybrid recall on real SQLite files and the real MiniLM model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings

from orchmem.config import MemoryValidationError, ScopeViolation
from orchmem.config.memory_settings import RetrievalSettings
from orchmem.models.core.shapes import EdgeInput, MemoryInput, derive_id, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.edits import Forget, apply_edit
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.schema.tables import MemoryRow
from orchmem.models.storage.search import reads as recall_reads
from orchmem.models.workspace.memlog import read_log
from orchmem.models.writeback.apply import write_memories

MANUAL = {"sourceType": "manual", "capturedBy": "user"}

FILLER = [
    "The weekly sync moved to Thursday afternoons", "Budget reviews happen every quarter",
    "The office plants need water on Mondays", "Invoices are paid within thirty days",
    "The team lunch is at the Italian place", "Laptops are refreshed every three years",
    "The wifi password changes each month", "Parking passes are issued by facilities",
    "The printer on floor two is broken", "Holiday requests go through the HR portal",
]


@pytest.fixture
def databases(tmp_path: Path) -> Databases:
    return Databases(make_settings(tmp_path, ""))


def seed(odb: OrchestratorDB, embedder: Embedder, items: list[dict[str, Any]],
         key: str = "seed", edges: list[dict[str, Any]] | None = None) -> list[str]:
    memories = [validate(MemoryInput, {"type": "Fact", "source": MANUAL, **item},
                         workspace=odb.workspace) for item in items]
    vectors = list(embedder.encode([m.content for m in memories]))
    result = write_memories(odb, key=key, task="t", memories=memories, vectors=vectors,
                            embedder=embedder.version,
                            edges=[validate(EdgeInput, e) for e in edges or []])
    return list(result["memoryIds"])


def test_paraphrase_is_found_by_the_vector_side_when_full_text_misses(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open("para")
    [target, *_] = seed(odb, embedder, [{"content": "The user is allergic to peanuts"},
                                        *({"content": f} for f in FILLER)])
    bundle = recall("para", "Which nuts would make them sick?", databases=databases)
    top = bundle.nodes[0]
    assert top.memory.memory_id == target
    assert top.scores.vector_rank == 1 and top.scores.text_rank is None
    assert bundle.candidates["text"] == 0 and bundle.vector_available


def test_rare_exact_term_is_found_by_full_text_when_vectors_rank_it_low(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open("rare")
    near_misses = ["zqx4417", "zqx4472", "zqx4771", "zqx4481", "zqx4470", "zqx7144"]
    target, *_ = seed(odb, embedder, [
        {"content": "The nightly export keeps failing on large accounts, see zqx4471"},
        *({"content": code} for code in near_misses),
        *({"content": f} for f in FILLER)])
    bundle = recall("rare", "zqx4471", databases=databases)
    found = next(n for n in bundle.nodes if n.memory.memory_id == target)
    assert found.scores.text_rank == 1
    assert found.scores.vector_rank is not None and found.scores.vector_rank > 3
    assert bundle.memory_ids.index(target) < found.scores.vector_rank - 1  # fusion lifted it


def test_fusion_returns_both_the_paraphrase_and_the_exact_term(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open("both")
    allergy, ticket, *_ = seed(odb, embedder, [
        {"content": "The user is allergic to peanuts"},
        {"content": "Ticket ZQX-4471 tracks the peanut-free catering order"},
        *({"content": f} for f in FILLER)])
    bundle = recall("both", "which nuts make them ill, ZQX-4471?", databases=databases, top_n=3)
    assert {allergy, ticket} <= set(bundle.memory_ids)
    assert bundle.provenance[0].sources[0].source_type.value == "manual"


def test_superseded_memories_are_hidden_unless_asked_for(databases: Databases,
                                                         embedder: Embedder) -> None:
    odb = databases.open("sup")
    old, new = seed(odb, embedder, [{"content": "The standup is at 9am", "key": "old"},
                                    {"content": "The standup moved to 10am", "key": "new"}],
                    edges=[{"fromMemoryId": "new", "toMemoryId": "old", "edgeType": "Updates"}])
    with odb.write():
        MemoryRow.update(status="superseded").where(MemoryRow.memory_id == old).execute()
    visible = recall("sup", "when is the standup", databases=databases)
    assert visible.memory_ids == [new]
    assert [e.edge_type.value for e in visible.edges] == ["Updates"]
    assert [n.memory_id for n in visible.neighbors] == [old]
    everything = recall("sup", "when is the standup", databases=databases, include_inactive=True)
    assert set(everything.memory_ids) == {old, new}


def test_same_database_and_query_give_the_same_order(databases: Databases,
                                                     embedder: Embedder) -> None:
    odb = databases.open("det")
    tools = ["Jira", "Linear", "GitHub", "Slack", "Figma", "Notion", "Sentry", "Grafana"]
    teams = ["billing", "search", "mobile", "infra", "growth"]
    seed(odb, embedder, [{"content": f"The {team} team tracks its {tool} usage weekly"}
                         for tool in tools for team in teams])
    # The floor off: the order of all 40 weakly related memories is what is compared.
    every = RetrievalSettings(min_similarity=0.0)
    first = recall("det", "which tool does the project use", databases=databases, params=every)
    again = recall("det", "which tool does the project use", databases=Databases(odb.settings),
                   params=every)
    assert first.memory_ids == again.memory_ids
    assert len(first.memory_ids) == 20


def test_types_filter_and_bad_types(databases: Databases, embedder: Embedder) -> None:
    odb = databases.open("types")
    seed(odb, embedder, [{"content": "Ship the beta", "type": "Goal"},
                         {"content": "Ship the beta docs", "type": "Todo"}])
    bundle = recall("types", "ship beta", databases=databases, types=["Goal"])
    assert [n.memory.type.value for n in bundle.nodes] == ["Goal"]
    assert recall("types", "ship beta", databases=databases,
                  types=["goal"]).memory_ids == bundle.memory_ids  # any case
    with pytest.raises(MemoryValidationError):
        recall("types", "ship", databases=databases, types=["goals"])


def test_without_embeddings_recall_answers_from_full_text_and_says_so(
        databases: Databases) -> None:
    odb = databases.open("fts-only")
    memory = validate(MemoryInput, {"type": "Fact", "content": "The vault code is 1234",
                                    "source": MANUAL})
    write_memories(odb, key="k", task="t", memories=[memory])  # no vectors
    bundle = recall("fts-only", "vault code", databases=databases)
    assert len(bundle.nodes) == 1
    assert bundle.vector_available is False
    assert any("no embeddings" in w for w in bundle.warnings)


def test_when_the_model_cannot_load_recall_falls_back_to_full_text(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "", embedding={"model": str(tmp_path / "no-such-model")})
    databases = Databases(settings)
    odb = databases.open("no-model")
    memory = validate(MemoryInput, {"type": "Fact", "content": "The vault code is 1234",
                                    "source": MANUAL})
    write_memories(odb, key="k", task="t", memories=[memory])
    bundle = recall("no-model", "vault code", databases=databases)
    assert len(bundle.nodes) == 1 and not bundle.vector_available
    assert "vector search unavailable" in bundle.warnings[0]


def test_cross_orchestrator_recall_is_denied_and_logged_without_opening_b(
        databases: Databases, embedder: Embedder) -> None:
    seed(databases.open("orch-b"), embedder, [{"content": "B's secret plan"}])
    databases.close_all()
    with pytest.raises(ScopeViolation):
        recall("orch-b", "secret plan", databases=databases, requester="orch-a")
    assert "orch-b" not in databases._open  # never opened
    log = read_log(databases.workspace("orch-a").log_path)
    assert log[-1]["event"] == "scope_denied" and log[-1]["target"] == "orch-b"


def test_another_orchestrators_memory_id_is_denied_and_logged(databases: Databases,
                                                              embedder: Embedder) -> None:
    seed(databases.open("orch-a"), embedder, [{"content": "A's note"}])
    foreign = derive_id("m", "orch-b", "k", 0)
    with pytest.raises(ScopeViolation):
        recall("orch-a", "note", databases=databases, memory_ids=[foreign])
    assert read_log(databases.workspace("orch-a").log_path)[-1]["event"] == "scope_denied"


def test_recall_on_an_orchestrator_without_memory_is_empty(databases: Databases) -> None:
    bundle = recall("nobody-yet", "anything", databases=databases)
    assert bundle.nodes == [] and bundle.warnings


def test_hostile_query_strings_return_normally(databases: Databases, embedder: Embedder) -> None:
    seed(databases.open("hostile"), embedder, [{"content": "Plain memory about tea"}])
    for query in ['"', "NEAR(", "tea*", "content:tea", "\udcff", "x" * 100_000, "", " "]:
        bundle = recall("hostile", query, databases=databases)
        assert isinstance(bundle.nodes, list)


def test_a_hard_forget_committed_mid_recall_never_leaves_a_node_without_content(
        tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    # The forget's WAL checkpoint waits for this very reader (same thread): keep it short.
    settings = make_settings(tmp_path, "", worker={"busy_timeout_ms": 200})
    databases = Databases(settings)
    target, kept = seed(databases.open("snap"), embedder, [
        {"content": "The vault code for the back door is 8082"},
        {"content": "The vault code for the front door is 3468"}])
    other = Databases(settings).open("snap")  # another connection: a concurrent writer
    assert other is not None
    read_rank_inputs = recall_reads.rank_inputs
    forgotten: list[str] = []

    def forget_between_reads(odb: OrchestratorDB, ids: Any) -> Any:
        # The searches have found the target; the forget commits before the rest is read.
        if not forgotten:
            apply_edit(other, Forget(op="forget", memory_id=target, hard=True),
                       key="forget-mid-recall", task="edit")
            forgotten.append(target)
        return read_rank_inputs(odb, ids)

    monkeypatch.setattr(recall_reads, "rank_inputs", forget_between_reads)
    during = recall("snap", "vault code door", databases=databases)
    assert forgotten == [target]
    assert set(during.memory_ids) == {target, kept}  # the snapshot from before the forget
    assert all(n.memory.content and n.memory.summary for n in during.nodes)
    assert all(p.sources for p in during.provenance)
    after = recall("snap", "vault code door", databases=databases)
    assert after.memory_ids == [kept]
