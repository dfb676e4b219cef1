"""The write-back task: candidate memories and edges in, memoryIds out, exactly once."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from orchmem.config import EmbeddingError, MemoryValidationError
from orchmem.models.database import OrchestratorDB
from orchmem.models.embedding import get_embedder
from orchmem.models.payloads import WritebackRequest
from orchmem.models.schema import MemoryInput, validate
from orchmem.models.writeback import write_memories

from .base import MemoryTask

logger = logging.getLogger(__name__)

WRITEBACK = "orchmem.writeback"


@shared_task(base=MemoryTask, bind=True, name=WRITEBACK)
def writeback(self: MemoryTask, orchestrator_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Validate ``payload`` (a WritebackRequest), embed its memories, upsert them.

    Returns ``{"ok", "memoryIds", "created", "reinforced", "edgeIds", "embedded",
    "duplicate", ...}``. A redelivered or re-published payload (same idempotency key)
    returns the stored result and writes nothing.
    """

    def body(odb: OrchestratorDB, key: str) -> dict[str, Any]:
        limit = odb.memory.writeback.max_memories_per_task
        if isinstance(payload.get("memories"), list) and len(payload["memories"]) > limit:
            raise MemoryValidationError(
                f"memories: {len(payload['memories'])} memories in one task; the limit is {limit}",
                [{"path": "memories", "message": f"at most {limit} items"}])
        request = validate(WritebackRequest, payload, workspace=odb.workspace,
                           max_content_chars=odb.memory.writeback.max_content_chars)
        vectors, embedder = embed_memories(self, odb, request.memories)
        result = write_memories(odb, key=key, task=self.name, memories=request.memories,
                                edges=request.edges, vectors=vectors, embedder=embedder)
        odb.log.write("writeback", key=key, created=result["created"],
                      reinforced=result["reinforced"], edges=result["edgeIds"],
                      embedded=result["embedded"], taskId=self.request.id)
        return result

    return self.guarded(orchestrator_id, payload, "wb", body)


def embed_memories(task: MemoryTask, odb: OrchestratorDB,
                   memories: list[MemoryInput]) -> tuple[list[Any] | None, str | None]:
    """Vectors for ``memories``, or (None, None) when the embedder fails.

    A failure is logged; the memories are stored without vectors, stay searchable by
    full text, and the re-embed job fills them in later.
    """
    if not memories:
        return [], None
    try:
        embedder = get_embedder(task.settings.embedding)
        matrix = embedder.encode([m.content for m in memories])
    except EmbeddingError as exc:
        logger.warning("embedding failed for %s: %s", odb.orchestrator_id, exc)
        odb.log.write("embedding_failed", count=len(memories), message=str(exc)[:500])
        return None, None
    return list(matrix), embedder.version
