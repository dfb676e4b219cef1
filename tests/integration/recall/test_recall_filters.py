"""Recall's run and conversation filters and the reranker plug-in, through the real
worker: the filters keep the memories with a source from that run or conversation;
a reranker reorders the fused top-K, and one that fails leaves the fused order with
a warning (logged)."""

from __future__ import annotations

from typing import Any

import pytest
import rerankers
from orchmem_testing import WorkerProcess

from orchmem.config import MemoryValidationError, Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.recall.bundle import RecallBundle
from orchmem.models.workspace.folders import Workspace
from orchmem.models.workspace.memlog import read_log
from orchmem.worker import MemoryClient

SOURCE = {"sourceType": "manual", "capturedBy": "user"}


def _with_reranker(settings: Settings, spec: str | None) -> Settings:
    retrieval = settings.memory.retrieval.model_copy(update={"reranker": spec})
    memory = settings.memory.model_copy(update={"retrieval": retrieval})
    return settings.model_copy(update={"memory": memory})


def _written(client: MemoryClient, **request: Any) -> list[str]:
    value = client.write_back(**request).wait(60)
    assert value is not None and value["ok"], value
    return list(value["memoryIds"])


def _recall(orch_id: str, settings: Settings, query: str, **options: Any) -> RecallBundle:
    """One recall by a client of ``settings``, closed after it (its helper threads too)."""
    with MemoryClient(orch_id, settings) as client:
        return client.recall(query, **options)


def test_run_and_conversation_filters_keep_their_memories(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    [said] = _written(client, transcript={"conversationId": "c-kiln", "messages": [
        {"role": "user", "text": "My kiln firing schedule starts at six."}]})
    [ran] = _written(client, workflow_output={"workflowRunId": "r-kiln", "stepId": "plan",
                                              "output": {"decisions": [
                                                  "Fire the kiln on Thursday"]}})
    [other] = _written(client, memories=[{"type": "Fact", "content": "The kiln is electric",
                                          "source": SOURCE}])
    assert {said, ran, other} <= set(client.recall("kiln", top_n=20).memory_ids)
    assert client.recall("kiln", run_id="r-kiln").memory_ids == [ran]
    assert client.recall("kiln", conversation_id="c-kiln").memory_ids == [said]
    assert client.recall("kiln", run_id="r-none").memory_ids == []
    assert client.recall("kiln", run_id="r-kiln", conversation_id="c-kiln").memory_ids == []
    with pytest.raises(MemoryValidationError, match="runId"):
        client.recall("kiln", run_id="")
    client.close()


def test_a_reranker_reorders_and_a_failing_one_keeps_the_fused_order(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    contents = ["The greenhouse vents open when it is warmer than twenty-five degrees "
                "in the afternoon", "The greenhouse has tomatoes",
                "The greenhouse heater is gas-fired and checked every autumn"]
    with MemoryClient(orch_id, settings) as writer:
        ids = _written(writer, memories=[
            {"type": "Fact", "content": c, "source": SOURCE} for c in contents])
    fused = _recall(orch_id, settings, "greenhouse", top_n=3)
    assert set(fused.memory_ids) == set(ids) and fused.warnings == []
    shortest = sorted(ids, key=lambda m: len(contents[ids.index(m)]))
    reranked = _recall(orch_id, _with_reranker(settings, "rerankers:by_length"), "greenhouse",
                       top_n=2)
    assert reranked.memory_ids == shortest[:2] and reranked.warnings == []
    assert rerankers.CALLS[-1] == ("greenhouse", fused.memory_ids)
    for spec, said in (("rerankers:raising", "RuntimeError: the reranking service is down"),
                       ("rerankers:unknown", "an id that is not one of its candidates"),
                       ("rerankers:NOT_CALLABLE", "is not callable"),
                       ("rerankers_missing:rank", "cannot be imported")):
        kept = _recall(orch_id, _with_reranker(settings, spec), "greenhouse", top_n=3)
        assert kept.memory_ids == fused.memory_ids, spec
        assert len(kept.warnings) == 1 and "memory.retrieval.reranker" in kept.warnings[0]
        assert said in kept.warnings[0] and "kept the fused order" in kept.warnings[0]
    log = read_log(Workspace.for_orchestrator(settings, orch_id).log_path)
    assert sum(1 for r in log if r["event"] == "rerank_failed") == 4
