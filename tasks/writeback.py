"""The write-back task: what an orchestrator produced in, memories and edges out, once."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from celery import shared_task

from orchmem.config import EmbeddingError
from orchmem.models.core.payloads import WritebackRequest, check_writeback
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.embedding import batch_vectors
from orchmem.models.embedding.device import bulk_embedder
from orchmem.models.execlog.append import append_and_project
from orchmem.models.execlog.rules import check_step_events
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.rows import retracted_of
from orchmem.models.writeback.apply import write_memories
from orchmem.models.writeback.extraction import load_extractor
from orchmem.models.writeback.proposals import Proposals, build
from orchmem.models.writeback.reconcile import Proposed
from orchmem.tasks.base import MemoryTask

logger = logging.getLogger(__name__)

WRITEBACK = "orchmem.writeback"


def _proposals(odb: OrchestratorDB, payload: Any) -> tuple[WritebackRequest, Proposals,
                                                             list[Proposed]]:
    """The validated request, its proposals and those within the per-task limit."""
    limits = odb.memory.writeback
    request = check_writeback(payload, odb.workspace,
                              max_memories=limits.max_memories_per_task,
                              max_content_chars=limits.max_content_chars)
    proposals = build(request, load_extractor(limits.extractor), odb.workspace,
                      limits.max_content_chars,
                      limits.episodic_summary_chars if limits.episodic_summary else None)
    return request, proposals, proposals.items[: limits.max_memories_per_task]


def writeback_texts(task: MemoryTask, odb: OrchestratorDB, payload: Any) -> list[str]:
    """The texts a write-back of ``payload`` embeds, explicit and extracted, for its
    batch's one model call (``texts_ahead``). A payload with something to extract is
    validated and extracted here and again in the task (regular expressions); with an extractor
    other than the built-in rules (an LLM, say) only the explicit texts: extracting
    twice would cost twice.
    An invalid payload has none: whatever fails here fails again in the task's own body,
    where it is that task's failure alone, not its batch's."""
    extracted = isinstance(payload, dict) and (
        payload.get("channelTranscript") is not None or payload.get("workflowOutput") is not None)
    if not extracted or odb.memory.writeback.extractor != "rules":
        # the explicit ones, without the cost of validating them twice
        return MemoryTask.texts_ahead(task, odb, payload)
    try:
        return [p.memory.content for p in _proposals(odb, payload)[2]]
    except Exception:  # reported by the task itself, as its own failure
        return []


def writeback_said_again(task: MemoryTask, odb: OrchestratorDB,
                         result: dict[str, Any]) -> bool:
    """A finished write-back delivered again is new evidence once a memory it wrote was
    retracted since (a soft forget, a retract): it runs again and makes it active."""
    with odb.read():
        return bool(retracted_of(result.get("memoryIds") or []))


@shared_task(base=MemoryTask, bind=True, name=WRITEBACK, kind="wb", batchable=True,
             texts_ahead=writeback_texts, said_again=writeback_said_again)
def writeback(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Validate ``payload`` (a WritebackRequest), extract, embed, reconcile, store.

    Returns ``{"ok", "memoryIds", "created", "reinforced", "superseded", "contradicted",
    "edgeIds", "embedded", "skipped", "ignoredKeys", "duplicate", ...}``, and ``"log"``
    (as the log task's result) when it carries its step's ``logEvents``, appended in the
    same transaction as its memories and its receipt. A redelivered
    or re-published payload (same idempotency key) returns the stored result and
    writes nothing.
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        limits = odb.memory.writeback
        request, proposals, items = _proposals(odb, payload)
        if len(proposals.items) > len(items):
            proposals.skipped.append({
                "from": "limit", "reason": f"{len(proposals.items) - len(items)} memories over "
                f"memory.writeback.max_memories_per_task ({limits.max_memories_per_task})"})
        events = check_step_events(request.log_events, odb.orchestrator_id, odb.memory.log)
        items, embedder = embed_proposals(self, odb, items)

        def log_step(result: dict[str, Any]) -> None:
            # the step's events commit with its memories and the one receipt
            result["log"] = append_and_project(odb, key, events, format_ts(utc_now()))

        result = write_memories(
            odb, key=key, task=self.name, memories=items,
            edges=[*request.edges, *proposals.edges_within(items)],
            embedder=embedder, also=log_step if events else None,
            extra_result={"skipped": proposals.skipped, "ignoredKeys": proposals.ignored_keys})
        odb.log.write("writeback", key=key, created=result["created"],
                      reinforced=result["reinforced"], superseded=result["superseded"],
                      contradicted=result["contradicted"], edges=result["edgeIds"],
                      embedded=result["embedded"], skipped=len(proposals.skipped),
                      taskId=self.request.id)
        return result

    return self.pipeline(orchestrator_id, payload, body)


def embed_proposals(task: MemoryTask, odb: OrchestratorDB,
                    items: list[Proposed]) -> tuple[list[Proposed], str | None]:
    """The proposals with their vectors, or unchanged (and None) when embedding fails.

    A failure is logged; the memories are stored without vectors, stay searchable by
    full text, and the re-embed job fills them in later.
    """
    if not items:
        return items, None
    try:
        embedder = bulk_embedder(task.settings.embedding)
        matrix = batch_vectors.encode(embedder, [p.memory.content for p in items])
    except EmbeddingError as exc:
        logger.warning("embedding failed for %s: %s", odb.orchestrator_id, exc)
        odb.log.write("embedding_failed", count=len(items), message=str(exc)[:500])
        return items, None
    return [replace(p, vector=v) for p, v in zip(items, matrix, strict=True)], embedder.version
