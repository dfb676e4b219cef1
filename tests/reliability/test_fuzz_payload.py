"""Fuzzed write-back payloads: only validation (or scope) errors, never a crash.

In process through the worker's own pipeline (validate -> extract -> reconcile -> store),
2,000 examples by default (ORCHMEM_FUZZ_EXAMPLES=10000 for more), then a sample through
a real worker.
"""

from __future__ import annotations

import contextlib
import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from orchmem_testing import make_settings, unique_id

from orchmem.config import OrchmemError
from orchmem.models.extraction import rules_extractor
from orchmem.models.payloads import WritebackRequest, key_of
from orchmem.models.proposals import build
from orchmem.models.schema import validate
from orchmem.models.storage.database import Databases, OrchestratorDB
from orchmem.models.writeback import write_memories
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.app import OrchmemCelery

EXAMPLES = int(os.environ.get("ORCHMEM_FUZZ_EXAMPLES", "2000"))
FIELDS = ["memories", "edges", "channelTranscript", "workflowOutput", "diagnostics",
          "idempotencyKey", "requestedAt", "type", "content", "summary", "importance",
          "confidence", "source", "sourceType", "sourcePath", "capturedBy", "conversationId",
          "messages", "role", "text", "workflowRunId", "stepId", "output", "findings",
          "severity", "key", "fromMemoryId", "toMemoryId", "edgeType", "weight", "createdAt"]
ENUMS = ["Fact", "Preference", "Decision", "Goal", "Todo", "user", "assistant", "manual",
         "channel_transcript", "ingest_file", "extractor", "RelatedTo", "error", "decisions",
         "todos", "/etc/passwd", "m-00000000-0000000000000000", "", "\x00", "x" * 300]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ENUMS),
                    st.text(max_size=80))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=10)), inner,
                    max_size=5)), max_leaves=25)
payloads = st.dictionaries(st.sampled_from(FIELDS), values, max_size=6)


@pytest.fixture(scope="module")
def odb(tmp_path_factory: pytest.TempPathFactory) -> OrchestratorDB:
    handle = Databases(make_settings(tmp_path_factory.mktemp("fuzz"), "")).open("fuzzed")
    assert handle is not None
    return handle


def pipeline(odb: OrchestratorDB, payload: Any) -> None:
    key = key_of(odb.orchestrator_id, "wb", payload)
    request = validate(WritebackRequest, payload, workspace=odb.workspace)
    proposals = build(request, rules_extractor, odb.workspace, 8000)
    write_memories(odb, key=key, task="fuzz", memories=proposals.items, edges=request.edges)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(payloads)
def test_fuzzed_payloads_raise_only_orchmem_errors(odb: OrchestratorDB,
                                                   payload: dict[str, Any]) -> None:
    with contextlib.suppress(OrchmemError):
        pipeline(odb, payload)


def test_the_database_is_sound_after_the_fuzz(odb: OrchestratorDB) -> None:
    assert odb.sql("PRAGMA integrity_check")[0][0] == "ok"
    assert odb.sql("SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM "
                   "memory_sources s WHERE s.memory_id = m.memory_id)")[0][0] == 0


@pytest.mark.usefixtures("worker")
def test_fuzzed_payloads_through_a_real_worker(app: OrchmemCelery) -> None:
    rng = random.Random(2)
    orch = unique_id("fuzz-worker")
    results = []
    for i in range(150):
        payload = {"memories": [{"type": rng.choice(ENUMS), "content": rng.choice(ENUMS),
                                 "source": {"sourceType": rng.choice(ENUMS),
                                            "capturedBy": rng.choice(ENUMS)},
                                 "importance": rng.choice([50, "50", -1, 1e9, None])}],
                   "idempotencyKey": f"fz-{i}"} if i % 2 else {
            rng.choice(FIELDS): rng.choice([*ENUMS, [], {}, 7, None]) for _ in range(3)}
        results.append(app.send_task(WRITEBACK, kwargs={"orchestrator_id": orch,
                                                        "payload": payload}))
    for result in results:
        value = result.get(timeout=120, propagate=False)
        assert isinstance(value, dict | OrchmemError), value
