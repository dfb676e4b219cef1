"""Rebuilding derived data from the records: the full-text index, the vectors, the bulletin.

Each part can be dropped and made again at any time; recall gives the same answers
(ranks included) afterwards, because the FTS index and the vectors are pure functions of
the records and the embedder. While vectors are being rebuilt, recall answers from the
vectors already made plus full text (the same dual read as a re-embed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.embedding.reembed import reembed_batch, remaining
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.derived import drop_vectors, rebuild_fts
from orchmem.models.storage.search import ann

#: Called with (part, done, total).
Progress = Callable[[str, int, int], None]


def rebuild_vectors(odb: OrchestratorDB, embedder: Embedder, batch_size: int,
                    progress: Progress | None = None) -> dict[str, int]:
    """Drop every vector and embed every live memory again, batch by batch (each batch
    commits on its own). Returns ``{"dropped", "embedded"}``."""
    dropped = drop_vectors(odb)
    total = remaining(odb, embedder.version)
    done = 0
    while True:
        count = reembed_batch(odb, embedder, batch_size)
        if count == 0:
            break
        done += count
        if progress:
            progress("vectors", done, total)
    return {"dropped": dropped, "embedded": done}


def rebuild_ann(odb: OrchestratorDB, embedder: Embedder) -> dict[str, Any]:
    """Make the approximate index file again from the stored vectors of ``embedder``
    when there are ``retrieval.ann_threshold`` of them or more, else remove it."""
    ann.remove_files(odb.workspace)
    done = ann.sync(odb, embedder.version, embedder.dim)
    count = ann.read_header(odb.workspace).count if done == "built" else 0
    return {"index": "usearch" if done == "built" else "exact", "vectors": count}


def rebuild(odb: OrchestratorDB, *, fts: bool, vectors: bool, bulletin: Callable[[], Any] | None,
            embedder: Embedder | None, batch_size: int, progress: Progress | None = None,
            ann_index: bool = False) -> dict[str, Any]:
    """Rebuild the chosen parts; ``bulletin`` writes a fresh bulletin snapshot when given;
    ``ann_index`` (or ``vectors``): the approximate index file, after the vectors.

    Returns what each part did. Raises StorageError, EmbeddingError.
    """
    report: dict[str, Any] = {}
    if fts:
        report["fts"] = {"indexed": rebuild_fts(odb)}
        if progress:
            progress("fts", 1, 1)
    if vectors:
        if embedder is None:
            raise ValueError("rebuilding vectors needs an embedder")
        report["vectors"] = rebuild_vectors(odb, embedder, batch_size, progress)
    if ann_index or vectors:
        if embedder is None:
            raise ValueError("rebuilding the vector index needs an embedder")
        report["annIndex"] = rebuild_ann(odb, embedder)
        if progress:
            progress("annIndex", 1, 1)
    if bulletin is not None:
        data = bulletin()
        report["bulletin"] = {"watermark": data.get("watermark"), "chars": data.get("chars")}
        if progress:
            progress("bulletin", 1, 1)
    odb.log.write("rebuilt", **report)
    return report
