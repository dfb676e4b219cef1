"""The sample recall a migration runs before it commits (migrations.check_migrated).

Row counts and ``integrity_check`` say nothing was lost; they do not say recall still
works on the new schema. So, inside the migration's transaction, a few live active
memories (the oldest, the middle and the newest) are looked up the way recall looks
them up, with the storage reads it uses:

- full text: the memory's own words find it (``fts.search``);
- assembly: its node reads back with the same content, and with its sources;
- vector: its stored vector, if any, decodes to the recorded dimension, finite, and of
  unit length when its embedder normalizes (the model itself is not loaded: a migration
  never waits on it).

Any miss is a problem named in MigrationFailed, and the migration rolls back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from orchmem.models.storage.schema.tables import live
from orchmem.models.storage.search import fts
from orchmem.models.storage.search import reads as recall_reads
from orchmem.models.storage.visibility import ALL_STATUSES, EVERYTHING

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

#: How many memories the sample holds (fewer when the file has fewer).
SAMPLE_SIZE = 3
#: Characters of a memory's content used as its query (recall cleans longer ones too).
QUERY_CHARS = 300


def sample(odb: OrchestratorDB) -> list[tuple[str, str]]:
    """(memoryId, content) of the oldest, middle and newest live active memories."""
    rows = odb.sql(f"SELECT id FROM memories WHERE status = 'active' AND {live()} "
                   "ORDER BY id")
    if not rows:
        return []
    picks = sorted({rows[0][0], rows[len(rows) // 2][0], rows[-1][0]})[:SAMPLE_SIZE]
    marks = ",".join("?" * len(picks))
    return [(r[0], r[1]) for r in odb.sql(
        f"SELECT memory_id, content FROM memories WHERE id IN ({marks}) ORDER BY id", picks)]


def problems(odb: OrchestratorDB) -> list[str]:
    """What the sample recall could not find, as sentences (empty when all is well)."""
    found: list[str] = []
    for memory_id, content in sample(odb):
        found += _look_up(odb, memory_id, content)
    return found


def _look_up(odb: OrchestratorDB, memory_id: str, content: str) -> list[str]:
    out = []
    hits = fts.search(odb, content[:QUERY_CHARS], limit=50, statuses=["active"],
                      view=EVERYTHING)
    if memory_id not in {h.memory_id for h in hits}:
        out.append(f"sample recall: {memory_id} is not found by its own words")
    found = recall_reads.assembly(odb, [memory_id], EVERYTHING, ALL_STATUSES)
    node = found.nodes.get(memory_id)
    if node is None or node.content != content:
        out.append(f"sample recall: {memory_id} does not read back with its content")
    if not any(s.memory_id == memory_id for s in found.sources):
        out.append(f"sample recall: {memory_id} has no sources")
    return out + _vector_problems(odb, memory_id)


def _vector_problems(odb: OrchestratorDB, memory_id: str) -> list[str]:
    rows = odb.sql("SELECT embedder, dim, vector FROM memory_embeddings "
                   "WHERE memory_id = ?", (memory_id,))
    if not rows:
        return []  # not embedded yet: the re-embedding job will
    embedder, dim, blob = rows[0]
    vector = np.frombuffer(blob, dtype=np.float32)
    unit = not str(embedder).endswith(":norm") or \
        abs(float(np.linalg.norm(vector)) - 1.0) <= 1e-3
    if vector.shape[0] != dim or not np.isfinite(vector).all() or not unit:
        return [f"sample recall: the vector of {memory_id} does not decode "
                f"({vector.shape[0]} of {dim} dimensions)"]
    return []
