"""A memory with every type, edge type, status and source type, and edits: what the
export / import / backup / migration tests move around."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from orchmem.config import Settings
from orchmem.models.core.shapes import EdgeInput, MemoryInput, MemoryType, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.embedding.reembed import reembed_batch
from orchmem.models.governance.edits import Forget, Link, Retract, Supersede, apply_edit
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.schema.migrations import downgrade
from orchmem.models.writeback.apply import write_memories

#: One source of each type (the ingest one gets its path in the workspace).
SOURCES: list[dict[str, Any]] = [
    {"sourceType": "workflow_output", "capturedBy": "extractor", "workflowRunId": "run-1",
     "stepId": "plan"},
    {"sourceType": "channel_transcript", "capturedBy": "extractor", "conversationId": "c-1"},
    {"sourceType": "ingest_file", "capturedBy": "system"},
    {"sourceType": "diagnostics", "capturedBy": "system"},
    {"sourceType": "manual", "capturedBy": "user"},
]
CONTENTS = {
    "Fact": "The office is in Porto near the river",
    "Preference": "The user prefers short answers in English",
    "Decision": "We decided to keep SQLite per orchestrator",
    "Identity": "The user is called Ana Ribeiro",
    "Event": "The launch happened on 3 March",
    "Observation": "Builds are slower on Mondays",
    "Goal": "Ship version two by June",
    "Todo": "Write the migration guide",
}


def seed(odb: OrchestratorDB, embedder: Embedder) -> dict[str, str]:
    """Fill ``odb``; returns {name: memoryId}. Every memory gets a vector."""
    ingest_file = odb.workspace.processed_dir / "notes.md"
    ingest_file.parent.mkdir(parents=True, exist_ok=True)
    ingest_file.write_text("notes")
    inputs = []
    for i, (memory_type, content) in enumerate(CONTENTS.items()):
        source = dict(SOURCES[i % len(SOURCES)])
        if source["sourceType"] == "ingest_file":
            source["sourcePath"] = str(ingest_file)
        inputs.append(validate(MemoryInput, {
            "type": memory_type, "content": content, "key": memory_type,
            "importance": 10 * i + 5, "confidence": 0.5 + i / 20, "source": source},
            workspace=odb.workspace))
    edges = [validate(EdgeInput, {"fromMemoryId": a, "toMemoryId": b, "edgeType": t,
                                  "weight": 0.5, "reason": f"{t} reason"})
             for a, b, t in (("Goal", "Todo", "PartOf"), ("Decision", "Fact", "CausedBy"),
                             ("Event", "Observation", "RelatedTo"))]
    vectors = embedder.encode([m.content for m in inputs])
    result = write_memories(odb, key="seed-1", task="t", memories=inputs, edges=edges,
                            vectors=list(vectors), embedder=embedder.version)
    ids = dict(zip([t.value for t in MemoryType], result["memoryIds"], strict=True))
    again = validate(MemoryInput, {"type": "Fact", "content": CONTENTS["Fact"],
                                   "source": SOURCES[1] | {"conversationId": "c-2"}})
    write_memories(odb, key="seed-2", task="t", memories=[again])  # a reinforcement
    apply_edit(odb, Supersede(op="supersede", memory_id=ids["Preference"],
                              content="The user prefers detailed answers in English",
                              reason="changed their mind"), key="e1", task="edit")
    apply_edit(odb, Retract(op="retract", memory_id=ids["Observation"], reason="wrong"),
               key="e2", task="edit")
    apply_edit(odb, Link(op="link", from_memory_id=ids["Fact"], to_memory_id=ids["Identity"],
                         edge_type="Contradicts", reason="test"), key="e3", task="edit")
    apply_edit(odb, Forget(op="forget", memory_id=ids["Event"], hard=True), key="e4",
               task="edit")
    while reembed_batch(odb, embedder, 64):  # the superseding memory's vector
        pass
    return ids


#: The side table schema 3's down step adds (models/storage/schema/governance_kept.py): the
#: release a file goes down to ignores a table it does not know, so the comparisons with
#: the schema that release really wrote (tests/data/) leave this one table out.
SIDE_TABLE = 'CREATE TABLE "governance_kept" '


def as_released(statements: list[str]) -> list[str]:
    """A downgraded file's ``sqlite_master`` statements without the side table."""
    return [s for s in statements if not s.startswith(SIDE_TABLE)]


def as_schema(settings: Settings, orchestrator_id: str, version: int = 1) -> Path:
    """Turn the orchestrator's current memory.db back into the file an earlier release
    wrote, by the migrations' own down steps (test_migrations.py checks the result
    against tests/data/memory_db_schema_v<version>.json). The backup the downgrade
    takes is removed: that release's file had none. Returns the file's path."""
    databases = Databases(settings)
    odb = databases.open(orchestrator_id, create=False, migrate_up=False)
    assert odb is not None
    try:
        downgrade(odb, version)
        with odb.bound():
            odb.db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        databases.close_all()
    shutil.rmtree(odb.workspace.backups_dir, ignore_errors=True)
    return odb.workspace.db_path
