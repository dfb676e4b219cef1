"""models/core/trusted.py builds the same objects as pydantic's model_construct, faster, and
refuses what it cannot build the same way."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from orchmem.models.core.shapes import (
    CapturedBy,
    EdgeType,
    MemoryEdge,
    MemoryNode,
    MemoryType,
    Source,
    SourceType,
    Status,
)
from orchmem.models.core.trusted import trusted
from orchmem.models.recall.bundle import Neighbor, Provenance, RecallBundle, Scores, SourceRecord


def _same(built: BaseModel, constructed: BaseModel) -> None:
    assert built == constructed
    assert built.__dict__ == constructed.__dict__
    assert list(built.__dict__) == list(constructed.__dict__)  # field order kept
    assert built.model_fields_set == constructed.model_fields_set
    assert built.__pydantic_extra__ == constructed.__pydantic_extra__
    assert built.__pydantic_private__ == constructed.__pydantic_private__
    assert built.model_dump(mode="json", by_alias=True) == \
        constructed.model_dump(mode="json", by_alias=True)


SOURCE = {"source_type": SourceType.CHANNEL_TRANSCRIPT, "source_path": None,
          "conversation_id": "c-1", "workflow_run_id": None, "step_id": None,
          "captured_by": CapturedBy.SYSTEM}
NODE = {"memory_id": "m-1", "orchestrator_id": "orch", "type": MemoryType.FACT,
        "importance": 50, "content": "Nate: hi", "summary": "hi", "confidence": 0.9,
        "status": Status.ACTIVE, "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "valid_from": None}


@pytest.mark.parametrize(("cls", "values"), [
    (Source, SOURCE),
    (Source, {"source_type": SourceType.MANUAL, "captured_by": CapturedBy.SYSTEM}),
    (SourceRecord, {**SOURCE, "captured_at": "2026-01-01T00:00:00Z"}),
    (MemoryEdge, {"edge_id": "e-1", "from_memory_id": "m-1", "to_memory_id": "m-2",
                  "edge_type": EdgeType.RELATED_TO, "weight": 0.5, "reason": None,
                  "created_at": "2026-01-01T00:00:00Z"}),
    (Scores, {"score": 1.0, "rrf": 0.5, "importance": 1.0, "recency": 1.0,
              "confidence": 1.0, "contradiction": 1.0}),
    (Neighbor, {"memory_id": "m-2", "type": MemoryType.TODO, "summary": "s",
                "status": Status.ACTIVE}),
    (Provenance, {"memory_id": "m-1", "sources": []}),
    (RecallBundle, {"orchestrator_id": "o", "query": "q", "nodes": [], "edges": [],
                    "neighbors": [], "provenance": [], "mode": "hybrid",
                    "vector_available": True, "candidates": {}, "warnings": [],
                    "took_ms": 1.0}),
])
def test_it_builds_what_model_construct_builds(cls: type[BaseModel],
                                               values: dict[str, object]) -> None:
    _same(trusted(cls, **values), cls.model_construct(**values))


def test_a_node_with_defaults_left_out_gets_fresh_ones() -> None:
    source = trusted(Source, **SOURCE)
    first = trusted(MemoryNode, **NODE, source=source)
    _same(first, MemoryNode.model_construct(**NODE, source=source))
    second = trusted(MemoryNode, **NODE, source=source)
    assert first.tags == [] and first.tags is not second.tags  # a factory default, per object
    assert "tags" not in first.model_fields_set and "valid_from" in first.model_fields_set


def test_a_name_that_is_not_a_field_or_a_missing_required_one_is_refused() -> None:
    with pytest.raises(TypeError, match="no field"):
        trusted(Scores, score=1.0, rrf=0.5, importance=1.0, recency=1.0, confidence=1.0,
                contradiction=1.0, vectorCosine=0.3)  # an alias, not a name
    with pytest.raises(TypeError, match="required field 'score'"):
        trusted(Scores, rrf=0.5, importance=1.0, recency=1.0, confidence=1.0,
                contradiction=1.0)


def test_a_model_it_cannot_build_alike_is_refused() -> None:
    class Loose(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: int = 1

    with pytest.raises(TypeError, match="model_construct"):
        trusted(Loose, a=2)
