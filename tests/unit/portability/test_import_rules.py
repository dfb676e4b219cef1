"""The column-at-a-time check of an export's lines: it passes a good file, and every
line the line-by-line check refuses makes it refuse the file too."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from orchmem.config import ImportRejected, ScopeViolation
from orchmem.models.core.shapes import orchestrator_tag
from orchmem.models.portability import import_files
from orchmem.models.portability.import_rules import rows_ok, vectors_at_once
from orchmem.models.storage.memories.portable import columns

ORCH = "rules"
TAG = orchestrator_tag(ORCH)
AT = "2026-01-02T03:04:05.000006Z"
EMBEDDER = "model:4:norm"


def record(i: int) -> dict[str, Any]:
    return {"capturedBy": "user", "confidence": 0.8, "content": f"Item {i} alpha",
            "conversationId": None, "createdAt": AT, "fingerprint": f"f{i}", "forgotten": 0,
            "importance": 50, "memoryId": f"m-{TAG}-{i:016x}", "metadata": {"k": i},
            "projectId": None, "reinforcements": 0, "scope": "global",
            "sensitivity": "internal", "sessionId": None, "sourcePath": None,
            "sourceType": "manual", "stated": 1, "status": "active", "stepId": None,
            "subject": None, "summary": f"Item {i}", "tags": ["a"] if i % 2 else [],
            "tier": "semantic", "timeRefs": None, "type": "Fact", "updatedAt": AT,
            "validFrom": None, "validTo": None, "value": None, "workflowRunId": None}


def audit(i: int) -> dict[str, Any]:
    return {"actor": "user", "after": {"type": "Fact"}, "at": AT, "before": None,
            "eventId": i + 1, "idempotencyKey": None, "memoryIds": [f"m-{TAG}-{i:016x}"],
            "op": "create", "reason": None}


GOOD = {"records": [record(i) for i in range(6)], "audit": [audit(i) for i in range(6)],
        "edges": [{"createdAt": AT, "edgeId": f"e-{TAG}-{i:016x}", "edgeType": "RelatedTo",
                   "fromMemoryId": f"m-{TAG}-{i:016x}", "reason": None,
                   "toMemoryId": f"m-{TAG}-{i + 1:016x}", "weight": 0.5} for i in range(3)]}


def fast(kind: str, rows: list[dict[str, Any]]) -> bool:
    return rows_ok(kind, columns(kind), rows, ORCH, import_files._ORDER[kind],
                   import_files.check_value)


def slow_refuses(kind: str, rows: list[dict[str, Any]]) -> bool:
    try:
        import_files._check_lines(kind, columns(kind), rows, ORCH)
    except (ImportRejected, ScopeViolation):
        return True
    return False


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_a_good_file_passes_both_ways(kind: str) -> None:
    assert fast(kind, GOOD[kind]) and not slow_refuses(kind, GOOD[kind])


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda row: row.__setitem__(key, value)


MUTATIONS: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "unknown field": ("records", _set("colour", "red")),
    "missing field": ("records", lambda row: row.pop("content")),
    "null where not null": ("records", _set("type", None)),
    "bool for an int": ("records", _set("importance", True)),
    "float for an int": ("records", _set("importance", 5.0)),
    "out of range": ("records", _set("importance", 101)),
    "NaN": ("records", _set("confidence", float("nan"))),
    "string for a float": ("records", _set("confidence", "0.5")),
    "bad enum": ("records", _set("type", "Gossip")),
    "control character": ("records", _set("content", "bell \x07 here")),
    "NUL in free text": ("records", _set("fingerprint", "a\x00b")),
    "bad timestamp": ("records", _set("updatedAt", "2026-02-30T00:00:00.000000Z")),
    "naive timestamp": ("records", _set("createdAt", "2026-01-02T03:04:05")),
    "another orchestrator's id": ("records", _set("memoryId", "m-00000000-0000000000000009")),
    "bad tag": ("records", _set("tags", ["has space"])),
    "tags not a list": ("records", _set("tags", "")),
    "metadata not an object": ("records", _set("metadata", [])),
    "edge of another orchestrator": ("edges", _set("edgeId", "e-00000000-0000000000000001")),
    "weight above one": ("edges", _set("weight", 1.5)),
    "memoryIds not a list": ("audit", _set("memoryIds", "m-x")),
    "bad id in memoryIds": ("audit", _set("memoryIds", ["m-nope"])),
    "eventId out of order": ("audit", _set("eventId", 3)),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@pytest.mark.parametrize("line", [0, 3, 5])
def test_any_line_the_slow_check_refuses_fails_the_fast_one(name: str, line: int) -> None:
    kind, mutate = MUTATIONS[name]
    rows = copy.deepcopy(GOOD[kind])
    mutate(rows[line % len(rows)])
    assert slow_refuses(kind, rows)
    assert not fast(kind, rows)


def vector_lines(n: int, dim: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    out = []
    for i in range(n):
        v = rng.standard_normal(dim).astype(np.float32)
        v /= np.linalg.norm(v)
        out.append({"dim": dim, "embedder": EMBEDDER, "memoryId": f"m-{TAG}-{i:016x}",
                    "vector": base64.b64encode(v.astype("<f4").tobytes()).decode()})
    return out


def test_vectors_at_once_match_line_by_line() -> None:
    rows = vector_lines(9)
    ids = {r["memoryId"] for r in rows}
    at_once = vectors_at_once(rows, ids, ORCH, EMBEDDER, 3)
    by_line = import_files._vectors_by_line(rows, ids, ORCH, EMBEDDER, 3)
    assert at_once is not None and at_once.keys() == by_line.keys()
    assert all(np.array_equal(at_once[k], by_line[k]) and at_once[k].dtype == np.float32
               for k in by_line)
    assert vectors_at_once(rows, ids, ORCH, "other:3:norm", 3) == {}


def _bad_vector(row: dict[str, Any]) -> None:
    raw = bytearray(base64.b64decode(row["vector"]))
    raw[0:4] = np.array([np.inf], dtype="<f4").tobytes()
    row["vector"] = base64.b64encode(bytes(raw)).decode()


VECTOR_MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "not base64": _set("vector", "!" * 16),
    "infinite value": _bad_vector,
    "not unit length": lambda row: row.__setitem__("vector", base64.b64encode(
        np.array([1.0, 1.0, 0.0], dtype="<f4").tobytes()).decode()),
    "another dimension": _set("dim", 4),
    "extra field": _set("note", 1),
    "another orchestrator's id": _set("memoryId", "m-00000000-0000000000000009"),
    "out of order": _set("memoryId", f"m-{TAG}-{0:016x}"),
}


@pytest.mark.parametrize("name", sorted(VECTOR_MUTATIONS))
def test_any_vector_line_the_slow_check_refuses_fails_the_fast_one(name: str) -> None:
    rows = vector_lines(5)
    ids = {r["memoryId"] for r in rows}
    VECTOR_MUTATIONS[name](rows[3])
    with pytest.raises((ImportRejected, ScopeViolation)):
        import_files._vectors_by_line(rows, ids, ORCH, EMBEDDER, 3)
    assert vectors_at_once(rows, ids, ORCH, EMBEDDER, 3) is None
