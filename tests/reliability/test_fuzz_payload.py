"""Fuzzed write-back payloads: only validation (or scope) errors, never a crash, and
what is accepted is stored exactly once.

The payloads are built from the schema (models/core/payloads.py, models/core/shapes.py): most
are valid write-back requests (memories with edges between them, transcripts, workflow
outputs, diagnostics), some of those are then mutated (a value replaced by a wrong
type, a field dropped or added), and a few are arbitrary JSON. So most of them reach
the store. In process through the worker's own pipeline (validate -> extract ->
reconcile -> store), 2,000 examples by default (ORCHMEM_FUZZ_EXAMPLES=10000 for more),
then a sample through a real worker.
"""

from __future__ import annotations

import copy
import os
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from orchmem_testing import make_settings, unique_id

from orchmem.config import OrchmemError
from orchmem.models.core.payloads import WritebackRequest, key_of
from orchmem.models.core.shapes import (
    CapturedBy,
    EdgeType,
    MemoryType,
    SourceType,
    normalize_text,
    validate,
)
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.writeback.apply import write_memories
from orchmem.models.writeback.extraction import rules_extractor
from orchmem.models.writeback.proposals import WORKFLOW_KEYS, build
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import OrchmemCelery

EXAMPLES = int(os.environ.get("ORCHMEM_FUZZ_EXAMPLES", "2000"))
FIELDS = ["memories", "edges", "channelTranscript", "workflowOutput", "diagnostics",
          "idempotencyKey", "requestedAt", "type", "content", "summary", "importance",
          "confidence", "source", "sourceType", "sourcePath", "capturedBy", "conversationId",
          "messages", "role", "text", "workflowRunId", "stepId", "output", "findings",
          "severity", "key", "fromMemoryId", "toMemoryId", "edgeType", "weight", "createdAt"]
ENUMS = ["Fact", "Preference", "Decision", "Goal", "Todo", "user", "assistant", "manual",
         "channel_transcript", "ingest_file", "extractor", "RelatedTo", "error", "decisions",
         "todos", "/etc/passwd", "m-00000000-0000000000000000", "", "\x00", "x" * 300]
#: What a mutation puts in place of a valid value: wrong types, out-of-range numbers,
#: strings the schema refuses, ids of nobody, paths out of the workspace.
JUNK = [*ENUMS, None, True, False, 0, -1, 101, 0.5, 1.5, float("inf"), float("nan"), "50",
        "fact", " ", "x" * 9000, [], {}, [None], {"": None}, "../../etc/passwd",
        "relative/path.md", "2024-13-45T00:00:00Z", "2024-05-01T10:00:00", "\u202e\x7f"]
#: Statements the rules extractor turns into memories, beside arbitrary text.
SENTENCES = ["I prefer tea to coffee.", "My name is Dana.", "We decided to ship on Friday.",
             "TODO: email the partners", "I live in Lyon.", "Goal: launch the beta in May",
             "I don't like window seats.", "The deadline is June 3.", "Decision: use Redis"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ENUMS),
                    st.text(max_size=80))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=10)), inner,
                    max_size=5)), max_leaves=25)
junk_payloads = st.dictionaries(st.sampled_from(FIELDS), values, max_size=6)

# ------------------------------------------------------------------ valid pieces

_printable = st.characters(codec="utf-8", exclude_categories=("Cc", "Cs"))
plain = st.text(_printable, min_size=1, max_size=120).filter(lambda t: normalize_text(t) != "")
texts = st.one_of(st.sampled_from(SENTENCES), plain,
                  st.tuples(st.sampled_from(SENTENCES), plain).map(" ".join))
ids = st.text(_printable, min_size=1, max_size=40)
timestamps = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),
                          timezones=st.just(UTC)).map(datetime.isoformat)
unit = st.floats(0.0, 1.0)


def sources(root: Path) -> st.SearchStrategy[dict[str, Any]]:
    captured = st.sampled_from([c.value for c in CapturedBy])
    plain_source = st.fixed_dictionaries(
        {"sourceType": st.sampled_from([s.value for s in SourceType
                                        if s is not SourceType.INGEST_FILE]),
         "capturedBy": captured},
        optional={"conversationId": ids, "workflowRunId": ids, "stepId": ids})
    file_source = st.fixed_dictionaries(
        {"sourceType": st.just(SourceType.INGEST_FILE.value), "capturedBy": captured,
         "sourcePath": st.sampled_from(["notes.md", "docs/plan.txt", "memory/ingest/a.json"])
         .map(lambda name: str(root / name))})
    return st.one_of(plain_source, file_source)


def memories(root: Path) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.sampled_from([t.value for t in MemoryType]), "content": texts,
         "source": sources(root)},
        optional={"summary": st.sampled_from(SENTENCES) | plain, "importance": st.integers(0, 100),
                  "confidence": unit, "createdAt": timestamps})


transcripts = st.fixed_dictionaries(
    {"conversationId": ids,
     "messages": st.lists(st.fixed_dictionaries(
         {"role": st.sampled_from(["user", "assistant", "system", "tool"]), "text": texts},
         optional={"at": timestamps}), min_size=1, max_size=4)},
    optional={"channel": ids})
workflow_items = st.one_of(texts, st.fixed_dictionaries(
    {"content": texts}, optional={"importance": st.integers(0, 100), "confidence": unit}))
workflows = st.fixed_dictionaries(
    {"workflowRunId": ids, "stepId": ids,
     "output": st.one_of(texts, st.dictionaries(
         st.sampled_from([*WORKFLOW_KEYS, "Next-Steps", "summary", "status"]),
         st.one_of(workflow_items, st.lists(workflow_items, max_size=3)), max_size=3))})
diagnostics = st.fixed_dictionaries(
    {"findings": st.lists(st.fixed_dictionaries(
        {"severity": st.sampled_from(["info", "warning", "error", "critical"]),
         "text": texts}, optional={"component": ids}), min_size=1, max_size=3)},
    optional={"runId": ids})


@st.composite
def requests(draw: st.DrawFn, memory: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """A valid WritebackRequest, with edges between keyed memories of the same request."""
    items = draw(st.lists(memory, max_size=4))
    keyed = []
    for index, item in enumerate(items):
        if draw(st.booleans()):
            item["key"] = f"k{index}"
            keyed.append(item["key"])
    payload: dict[str, Any] = {"memories": items} if items else {}
    if len(keyed) >= 2:
        pairs = st.permutations(keyed).map(lambda ends: ends[:2])
        edges = draw(st.lists(st.tuples(pairs, st.sampled_from([e.value for e in EdgeType]),
                                        unit), max_size=3))
        payload["edges"] = [{"fromMemoryId": a, "toMemoryId": b, "edgeType": kind,
                             "weight": weight} for (a, b), kind, weight in edges]
    for name, strategy in (("channelTranscript", transcripts), ("workflowOutput", workflows),
                           ("diagnostics", diagnostics), ("requestedAt", timestamps),
                           ("idempotencyKey", st.uuids().map(str))):
        if draw(st.booleans()):
            payload[name] = draw(strategy)
    if not ({"memories", "channelTranscript", "workflowOutput", "diagnostics"} & set(payload)):
        payload["memories"] = [draw(memory)]
    return payload


def _slots(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) inside ``value``, the top level included."""
    found: list[tuple[Any, Any]] = []
    children = value.items() if isinstance(value, dict) else enumerate(value)
    for slot, child in children:
        found.append((value, slot))
        if isinstance(child, dict | list) and child:
            found += _slots(child)
    return found


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """A valid request with one to three mutations: replace, drop or add a field."""
    payload = copy.deepcopy(draw(valid))
    for _ in range(draw(st.integers(1, 3))):
        container, slot = draw(st.sampled_from(_slots(payload) or [(payload, None)]))
        action = draw(st.sampled_from(["replace", "drop", "add"]))
        if action == "replace" and slot is not None:
            container[slot] = draw(st.sampled_from(JUNK) | values)
        elif action == "drop" and slot is not None:
            del container[slot]
        elif isinstance(container, dict):
            container[draw(st.sampled_from([*FIELDS, "unknownField"]))] = draw(values)
        else:
            container.append(draw(values))
    return payload


def payloads(root: Path) -> st.SearchStrategy[dict[str, Any]]:
    """Mostly valid requests (4 in 7), mutated ones (2 in 7), arbitrary JSON (1 in 7).

    ``root`` is the orchestrator's runtime root, where valid sourcePaths point.
    """
    valid = requests(memories(root))
    kinds = {"valid": valid, "mutated": mutated(valid), "junk": junk_payloads}
    return st.sampled_from(["valid"] * 4 + ["mutated"] * 2 + ["junk"]).flatmap(kinds.get)


# ------------------------------------------------------------------ the runs


@dataclass
class Ledger:
    """What the fuzz sent, and what the write path did with it."""

    examples: int = 0
    #: Calls that went through write_memories (a new write, or a duplicate of one).
    reached: int = 0
    #: Key -> result of the write that stored it (duplicates are not stored again).
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Keys of requests refused with an orchmem error.
    refused: set[str] = field(default_factory=set)


@pytest.fixture(scope="module")
def odb(tmp_path_factory: pytest.TempPathFactory) -> OrchestratorDB:
    handle = Databases(make_settings(tmp_path_factory.mktemp("fuzz"), "")).open("fuzzed")
    assert handle is not None
    return handle


def pipeline(odb: OrchestratorDB, payload: Any, key: str) -> dict[str, Any]:
    request = validate(WritebackRequest, payload, workspace=odb.workspace)
    proposals = build(request, rules_extractor, odb.workspace, 8000)
    return write_memories(odb, key=key, task="fuzz", memories=proposals.items,
                          edges=request.edges)


def attempt(odb: OrchestratorDB, payload: Any, ledger: Ledger) -> None:
    """One payload through the pipeline: anything but an orchmem error fails the test."""
    ledger.examples += 1
    try:
        key = key_of(odb.orchestrator_id, "wb", payload)
    except OrchmemError:
        return
    try:
        result = pipeline(odb, payload, key)
    except OrchmemError:
        ledger.refused.add(key)
        return
    ledger.reached += 1
    if not result["duplicate"]:
        assert key not in ledger.stored, f"{key} written twice"
        ledger.stored[key] = result


def check_stored_once(odb: OrchestratorDB, ledger: Ledger) -> None:
    """Each stored request has its receipt and its memories, each memory exactly once."""
    receipts = dict(odb.sql("SELECT key, status FROM task_receipts"))
    assert all(receipts.get(key) == "done" for key in ledger.stored)
    # A request refused inside the write path left nothing, not even its receipt.
    assert not {key for key in ledger.refused - set(ledger.stored) if key in receipts}
    created = [m for result in ledger.stored.values() for m in result["created"]]
    assert len(created) == len(set(created)), "a memory created by two requests"
    in_db = [row[0] for row in odb.sql("SELECT memory_id FROM memories")]
    # Every stored memory was created by exactly one accepted request, and no other.
    assert sorted(in_db) == sorted(created)
    named = {m for result in ledger.stored.values() for m in result["memoryIds"]}
    assert named <= set(in_db)
    # An edge is kept once per (from, to, type): a restated request names the same one.
    edges = {e for result in ledger.stored.values() for e in result["edgeIds"]}
    assert edges <= {row[0] for row in odb.sql("SELECT edge_id FROM memory_edges")}


def test_fuzzed_payloads_mostly_reach_the_store_once_or_fail_with_orchmem_errors(
        odb: OrchestratorDB) -> None:
    ledger = Ledger()

    @settings(max_examples=EXAMPLES, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(payloads(odb.workspace.runtime_root))
    def run(payload: dict[str, Any]) -> None:
        attempt(odb, payload, ledger)

    run()
    assert ledger.reached * 2 >= ledger.examples, (ledger.reached, ledger.examples)
    assert len(ledger.stored) * 4 >= ledger.examples, (len(ledger.stored), ledger.examples)
    check_stored_once(odb, ledger)


def test_the_database_is_sound_after_the_fuzz(odb: OrchestratorDB) -> None:
    assert odb.sql("SELECT count(*) FROM memories")[0][0] > 0
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
