"""Full-text queries: no user string, however hostile, can raise or become FTS syntax."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from orchmem_testing import make_settings

from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.language import textquery
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.search import fts
from orchmem.models.writeback.apply import write_memories

EXAMPLES = int(os.environ.get("ORCHMEM_FUZZ_EXAMPLES", "2000"))
HOSTILE = [
    '"', '""', '"unbalanced', "NEAR(a b)", "NEAR(a b, 3)", "a NEAR b", "*", "tea*", "^tea",
    "content:tea", "summary : tea", "{content summary}: tea", "- tea", "tea AND", "AND", "OR OR",
    "NOT", "NOT tea", "(tea", "tea)", "((((", "))", "a + b", "'; DROP TABLE memories; --",
    "\x00", "tea\x00coffee", "\udcff\udcfe", "caf\udce9", "", "   ", "\n\t", "x" * 100_000,
    "🍵 tea 🍵", "Ωμέγα", "ẞtraße", "中文 查询", "rank:", "bm25(memory_fts)", "1e308", "-0",
]


@pytest.fixture(scope="module")
def odb(tmp_path_factory: pytest.TempPathFactory) -> OrchestratorDB:
    databases = Databases(make_settings(tmp_path_factory.mktemp("fts"), ""))
    handle = databases.open("fts-fuzz")
    assert handle is not None
    texts = ["I prefer green tea in the morning", "The café serves crêpes",
             "Deploy the NEAR service on Friday", "Running late: meeting moved to 3pm",
             "AND OR NOT are words too", "Straße und Ωμέγα"]
    memories = [validate(MemoryInput, {"type": "Fact", "content": t,
                                       "source": {"sourceType": "manual", "capturedBy": "user"}})
                for t in texts]
    write_memories(handle, key="seed", task="t", memories=memories)
    return handle


def found(odb: OrchestratorDB, text: str) -> list[str]:
    hits = fts.search(odb, text, limit=10, statuses=["active"])
    odb.db.close()  # each search must stand alone: no state kept between queries
    with odb.bound():
        rows = dict(odb.db.execute_sql("SELECT memory_id, content FROM memories").fetchall())
    return [rows[h.memory_id] for h in hits]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_query_never_raises(odb: OrchestratorDB, query: str) -> None:
    fts.search(odb, query, limit=10, statuses=["active"])


def test_operators_are_searched_as_plain_words(odb: OrchestratorDB) -> None:
    assert found(odb, "NEAR") == ["Deploy the NEAR service on Friday"]
    assert found(odb, "AND OR NOT words") == ["AND OR NOT are words too"]
    assert found(odb, 'content:"tea"') == ["I prefer green tea in the morning"]


def test_column_filter_syntax_does_not_restrict_columns(odb: OrchestratorDB) -> None:
    # "summary:" would limit the match to one column if it reached FTS5 as syntax.
    assert "I prefer green tea in the morning" in found(odb, "summary: green")


def test_stemming_and_diacritics(odb: OrchestratorDB) -> None:
    assert found(odb, "cafe crepe") == ["The café serves crêpes"]
    assert found(odb, "run") == ["Running late: meeting moved to 3pm"]
    assert found(odb, "preferring") == ["I prefer green tea in the morning"]


def test_query_terms_are_bounded_and_quoted() -> None:
    terms = textquery.query_terms(" ".join(f"w{i}" for i in range(500)))
    assert len(terms) == textquery.MAX_TERMS
    assert fts.match_expression(["a", "b"]) == '"a" OR "b"'
    assert textquery.query_terms("what is the") == ["what", "is", "the"]  # only stopwords: kept
    assert textquery.query_terms("what is the tea") == ["tea"]


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec=None, categories=None), max_size=300))
def test_fuzzed_queries_never_raise(odb: OrchestratorDB, query: str) -> None:
    hits = fts.search(odb, query, limit=5, statuses=["active"])
    assert len(hits) <= 5


@pytest.fixture(scope="module")
def token_odb(tmp_path_factory: pytest.TempPathFactory) -> OrchestratorDB:
    """One database for every example of the stored-token fuzz (a file per example would
    make the full EXAMPLES too slow), apart from ``odb`` so the tokens never reach the
    exact-result tests above."""
    handle = Databases(make_settings(tmp_path_factory.mktemp("fts-tokens"), "")).open(
        "fts-tokens")
    assert handle is not None
    return handle


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(categories=["Lu", "Ll", "Nd"]), min_size=3, max_size=20))
def test_a_stored_token_is_found_by_its_own_text(token_odb: OrchestratorDB, token: str) -> None:
    memory = validate(MemoryInput, {"type": "Fact", "content": f"zz {token} zz",
                                    "source": {"sourceType": "manual", "capturedBy": "user"}})
    result = write_memories(token_odb, key=f"tok-{token.encode().hex()}", task="t",
                            memories=[memory])
    hits = fts.search(token_odb, token, limit=50, statuses=["active"],
                      within=result["memoryIds"])
    assert [h.memory_id for h in hits] == result["memoryIds"]


def test_database_path_is_untouched_by_queries(odb: OrchestratorDB) -> None:
    before = Path(odb.workspace.db_path).stat().st_size
    for query in HOSTILE:
        fts.search(odb, query, limit=5, statuses=["active"])
    assert Path(odb.workspace.db_path).stat().st_size == before
