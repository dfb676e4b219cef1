"""An approximate nearest-neighbour index of one orchestrator's vectors, in a file.

Above ``memory.retrieval.ann_threshold`` vectors, recall's vector stage asks this index
for candidates instead of scanning a matrix of every vector. The index is a usearch
HNSW graph with bfloat16 vectors in ``vectors.usearch`` beside ``memory.db`` (0600),
keyed by the memory row's integer key (``memories.id``); its header
``vectors.usearch.json`` records the embedder, the dimensions, the count, the change
sequence and delete counter it holds (``embedding_seq``, ``embedding_deletes``), the
file's size and its sha256.

Readers memory-map the file (``Index.restore(view=True)``): a reader's memory does not
grow with the number of vectors. They take ``OVERSAMPLE`` times the candidates asked
for, read those candidates' stored float32 vectors from ``memory_embeddings`` and score
them exactly (:func:`~orchmem.models.storage.search.hits.exact_scores`), so the order is
exact search's. Vectors written after the file (at most ``MAX_LAG``) are scored
exactly too; a vector deleted after it has no stored row and drops out. A file that is
missing, truncated, of another embedder or dimension, ahead of the database or too far
behind it is not used: recall falls back to exact search and logs a warning, and the
writer builds the file again.

The writer brings the file up to date after its transactions commit (:func:`sync`):
once ``FLUSH_EVERY`` vectors were written since, or any was deleted, and always after a
hard forget (models/governance/derived.py), which removes the forgotten vector from
the graph, overwrites its bytes (:func:`_erase`) and rewrites the file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.schema.tables import META_EMBEDDING_DELETES, META_EMBEDDING_SEQ
from orchmem.models.storage.search.hits import VectorHit, exact_scores
from orchmem.models.workspace.atomic import file_sha256, fsync_path
from orchmem.models.workspace.folders import Workspace

logger = logging.getLogger(__name__)

FILE_NAME = "vectors.usearch"
HEADER_NAME = "vectors.usearch.json"
FORMAT = 1
#: Candidates taken from the graph per answer asked for (re-scored exactly).
OVERSAMPLE = 4
#: The fewest candidates taken, and the graph's search breadth per candidate.
MIN_WINDOW = 64
#: Vectors written since the file that a reader scores exactly; beyond, it is not used.
MAX_LAG = 8192
#: The writer rewrites the file once this many vectors were written since.
FLUSH_EVERY = 1024
#: Graph degree and build breadth (usearch's defaults are 16 and 128: 64 builds twice as
#: fast, and the candidates are re-scored exactly anyway).
CONNECTIVITY = 16
EXPANSION_ADD = 64
#: The graph's vectors: bfloat16 (2 bytes each, like float16, and the fastest distance
#: on this machine's CPU: 1,969 against 1,317 vectors added per second); the scores an
#: answer gives come from the stored float32 vectors.
DTYPE = "bf16"
#: Rows read from memory_embeddings per statement while building.
_BATCH = 20_000
#: Keys of the zero vectors that overwrite removed ones (memories' keys are far below).
_FILLER = 1 << 62
_READER = "ann_reader"
_WRITER = "ann_writer"


def _index_class() -> Any:
    """usearch's ``Index``, imported after ONNX Runtime: the other way round, loading ONNX
    Runtime later in the process crashes it (a segmentation fault, usearch 2.26 with
    onnxruntime 1.32: their native libraries clash unless ONNX Runtime's loads first)."""
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401
    from usearch.index import Index

    return Index


class AnnUnusable(Exception):
    """The index file cannot be trusted (the message says why)."""


@dataclass(frozen=True)
class Header:
    """What ``vectors.usearch.json`` says of the index file."""

    embedder: str
    dim: int
    count: int
    seq: int
    deletes: int
    size: int
    sha256: str
    format: int = FORMAT


def paths(workspace: Workspace) -> tuple[Path, Path]:
    """The index file and its header, beside memory.db."""
    folder = workspace.db_path.parent
    return folder / FILE_NAME, folder / HEADER_NAME


def read_header(workspace: Workspace) -> Header:
    """The header of the index file; AnnUnusable when missing or malformed."""
    _, header_path = paths(workspace)
    try:
        data = json.loads(header_path.read_text())
        header = Header(**{k: data[k] for k in Header.__dataclass_fields__})
    except FileNotFoundError:
        raise AnnUnusable("no header") from None
    except (OSError, ValueError, KeyError, TypeError):
        raise AnnUnusable("unreadable header") from None
    if header.format != FORMAT:
        raise AnnUnusable(f"header format {header.format}, expected {FORMAT}")
    return header


def _meta(odb: OrchestratorDB) -> tuple[int, int]:
    meta = dict(odb.sql("SELECT key, value FROM meta WHERE key IN (?, ?)",
                        (META_EMBEDDING_SEQ, META_EMBEDDING_DELETES)))
    return int(meta.get(META_EMBEDDING_SEQ, 0)), int(meta.get(META_EMBEDDING_DELETES, 0))


def _open(workspace: Workspace, embedder: str, dim: int, view: bool) -> tuple[Any, Header]:
    """The index file (memory-mapped with ``view``) and its header, checked against
    each other and against ``embedder`` and ``dim``; AnnUnusable otherwise."""
    Index = _index_class()
    path, _ = paths(workspace)
    header = read_header(workspace)
    if header.embedder != embedder or header.dim != dim:
        raise AnnUnusable("made by another embedder")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise AnnUnusable("no index file") from None
    if size != header.size:
        raise AnnUnusable(f"truncated or replaced ({size} bytes, header says {header.size})")
    try:
        index = Index.restore(str(path), view=view)
    except (RuntimeError, ValueError, OSError) as exc:
        raise AnnUnusable(f"unreadable ({type(exc).__name__})") from None
    if index is None or index.ndim != dim or len(index) != header.count:
        raise AnnUnusable("its count or dimensions differ from the header")
    return index, header


def verify(workspace: Workspace) -> str | None:
    """What is wrong with the index file (``orchmem check``): None when there is none
    or it is whole (its size and sha256 are the header's, usearch reads its metadata)."""
    Index = _index_class()
    path, header_path = paths(workspace)
    if not path.exists() and not header_path.exists():
        return None
    try:
        header = read_header(workspace)
        if not path.exists():
            return "header without an index file"
        if path.stat().st_size != header.size:
            return "truncated (its size is not the header's)"
        if file_sha256(path) != header.sha256:
            return "corrupt (its sha256 is not the header's)"
        if Index.metadata(str(path)) is None:
            return "corrupt (usearch cannot read it)"
    except AnnUnusable as exc:
        return str(exc)
    except (OSError, RuntimeError, ValueError) as exc:
        return f"unreadable ({type(exc).__name__})"
    return None


def load(path: Path) -> Any:
    """The index in the file at ``path``, read into memory (None when usearch cannot)."""
    return _index_class().restore(str(path))


# -- readers ---------------------------------------------------------------------------


@dataclass
class AnnIndex:
    """A reader's memory-mapped index and the vectors written since it (scored exactly)."""

    embedder: str
    dim: int
    index: Any
    header: Header
    stamp: tuple[int, int, int]
    #: The database's embedding_seq the lag was read at, and the vectors of the
    #: embedder written after the file (memoryIds, float32 rows): replaced as one.
    lag: tuple[int, list[str], np.ndarray] = (-1, [], np.zeros((0, 0), np.float32))
    #: One search of the graph at a time (usearch's per-search state is not per thread).
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __len__(self) -> int:
        return self.header.count + len(self.lag[1])


@dataclass(frozen=True)
class _Refused:
    """An index file a reader found unusable, remembered by its stat until it changes."""

    stamp: tuple[int, int, int]


def reader(odb: OrchestratorDB, embedder: str, dim: int) -> AnnIndex | None:
    """The index to search in this snapshot, or None: exact search (the threshold is
    0, the file is missing, or it is not usable: a warning, once per file)."""
    threshold = odb.memory.retrieval.ann_threshold
    if threshold == 0:
        return None
    path, _ = paths(odb.workspace)
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    held = odb.cache.get(_READER)
    if isinstance(held, _Refused) and held.stamp == stamp:
        return None
    if not isinstance(held, AnnIndex) or held.stamp != stamp or held.embedder != embedder \
            or held.dim != dim:
        try:
            index, header = _open(odb.workspace, embedder, dim, view=True)
        except AnnUnusable as exc:
            _refuse(odb, stamp, str(exc))
            return None
        held = odb.cache[_READER] = AnnIndex(embedder, dim, index, header, stamp)
    if held.header.count < threshold:
        return None
    seq, deletes = _meta(odb)
    if seq < held.header.seq or deletes < held.header.deletes:
        _refuse(odb, stamp, "ahead of the database")
        return None
    if seq != held.lag[0] and not _read_lag(odb, held, seq):
        _refuse(odb, stamp, f"more than {MAX_LAG} vectors behind the database")
        return None
    return held


def _refuse(odb: OrchestratorDB, stamp: tuple[int, int, int], why: str) -> None:
    logger.warning("vector index file of %s not used (%s): exact search",
                   odb.orchestrator_id, why)
    odb.log.write("ann_index_unusable", reason=why[:200])
    odb.cache[_READER] = _Refused(stamp)


def _read_lag(odb: OrchestratorDB, held: AnnIndex, seq: int) -> bool:
    rows = odb.sql("SELECT memory_id, vector FROM memory_embeddings WHERE seq > ? "
                   "AND embedder = ? AND dim = ? LIMIT ?",
                   (held.header.seq, held.embedder, held.dim, MAX_LAG + 1))
    if len(rows) > MAX_LAG:
        return False
    held.lag = (seq, [m for m, _ in rows], _matrix([blob for _, blob in rows], held.dim))
    return True


def _matrix(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)


def top(odb: OrchestratorDB, held: AnnIndex, query: np.ndarray, window: int) -> list[VectorHit]:
    """The best ``window`` of the graph's candidates and the vectors written since the
    file, scored exactly from their stored vectors, ordered by cosine then memoryId."""
    breadth = max(window, MIN_WINDOW)
    _, lag_ids, lag_vectors = held.lag
    with held.lock:
        held.index.expansion_search = max(2 * breadth, 128)
        found = held.index.search(np.asarray(query, dtype=np.float32), breadth)
        keys = [int(k) for k in np.asarray(found.keys)[:len(found)]]
    ids: list[str] = []
    blobs: list[bytes] = []
    for chunk in _chunks(keys, 900):
        marks = ", ".join("?" * len(chunk))
        for memory_id, blob in odb.sql(
                "SELECT e.memory_id, e.vector FROM memories m JOIN memory_embeddings e "
                f"ON e.memory_id = m.memory_id WHERE m.id IN ({marks}) AND e.embedder = ? "
                "AND e.dim = ?", (*chunk, held.embedder, held.dim)):
            ids.append(memory_id)
            blobs.append(blob)
    scored = dict(zip(ids, exact_scores(_matrix(blobs, held.dim), query).tolist(), strict=True))
    if lag_ids:
        # The stored vector of a memory rewritten since the file is the one scored.
        scored.update(zip(lag_ids, exact_scores(lag_vectors, query).tolist(), strict=True))
    best = sorted((-score, memory_id) for memory_id, score in scored.items())[:window]
    return [VectorHit(memory_id, -negated) for negated, memory_id in best]


def search(odb: OrchestratorDB, held: AnnIndex, query: np.ndarray, limit: int,
           keep: Callable[[list[str]], set[str]] | None,
           kept: Callable[[list[VectorHit], Callable[[list[str]], set[str]], int],
                          list[VectorHit]]) -> list[VectorHit]:
    """The top ``limit`` hits ``keep`` passes: ``OVERSAMPLE`` times as many candidates,
    four times more while the filter leaves too few, up to every vector."""
    window = max(limit * OVERSAMPLE, MIN_WINDOW)
    while True:
        hits = top(odb, held, query, window)
        if keep is None:
            return hits[:limit]
        passing = kept(hits, keep, limit)
        if len(passing) >= limit or window >= len(held):
            return passing
        window *= 4


def _chunks(items: Sequence[int], size: int) -> Iterator[Sequence[int]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


# -- the writer ------------------------------------------------------------------------


def _new_index(dim: int) -> Any:
    Index = _index_class()
    return Index(ndim=dim, metric="ip", dtype=DTYPE, connectivity=CONNECTIVITY,
                 expansion_add=EXPANSION_ADD)


def _rows(odb: OrchestratorDB, embedder: str, dim: int, after: int = 0
          ) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """(keys, vectors) of the embedder's stored vectors with seq > ``after``, in batches
    (in key order for a build, in seq order, by its index, for the few since a file)."""
    last = 0
    order = "e.seq" if after else "m.id"
    while True:
        rows = odb.sql(f"SELECT {order}, m.id, e.vector FROM memories m JOIN "
                       "memory_embeddings e ON e.memory_id = m.memory_id "
                       f"WHERE {order} > ? AND e.seq > ? AND e.embedder = ? AND e.dim = ? "
                       f"ORDER BY {order} LIMIT ?", (last, after, embedder, dim, _BATCH))
        if not rows:
            return
        last = rows[-1][0]
        yield (np.array([r[1] for r in rows], dtype=np.uint64),
               _matrix([r[2] for r in rows], dim))


def build(odb: OrchestratorDB, embedder: str, dim: int) -> Header:
    """Make the index file from the stored vectors of ``embedder`` (one read snapshot)."""
    index = _new_index(dim)
    with odb.snapshot():
        seq, deletes = _meta(odb)
        for keys, matrix in _rows(odb, embedder, dim):
            index.add(keys, matrix)
    header = _save(odb.workspace, index, embedder, dim, seq, deletes)
    odb.cache[_WRITER] = (index, header)
    return header


def _save(workspace: Workspace, index: Any, embedder: str, dim: int, seq: int,
          deletes: int) -> Header:
    """Write the file and then its header, each to a private temporary file, fsynced,
    renamed over the old one."""
    path, header_path = paths(workspace)
    temporary = path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    try:
        index.save(str(temporary))
        fsync_path(temporary)
        header = Header(embedder, dim, len(index), seq, deletes, temporary.stat().st_size,
                        file_sha256(temporary))
        header_temporary = header_path.with_name(f".{HEADER_NAME}.{os.getpid()}.tmp")
        fd = os.open(header_temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(asdict(header), handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        os.replace(header_temporary, header_path)
    finally:
        temporary.unlink(missing_ok=True)
    return header


def remove_files(workspace: Workspace) -> None:
    for path in paths(workspace):
        path.unlink(missing_ok=True)


def after_write(odb: OrchestratorDB, embedder: str, dim: int, count: int) -> None:
    """:func:`sync` after a committed write of ``count`` vectors in all; a failure is
    logged (the write stands; readers score what the file lacks, or search exactly)."""
    try:
        sync(odb, embedder, dim, count=count)
    except (AnnUnusable, OSError, RuntimeError, ValueError, MemoryError) as exc:
        logger.warning("vector index file of %s not brought up to date: %s",
                       odb.orchestrator_id, type(exc).__name__)


def after_forget(odb: OrchestratorDB) -> str:
    """After a hard forget has committed: the file without the forgotten vectors (or no
    file, when it cannot be read to remove them)."""
    try:
        header = read_header(odb.workspace)
    except AnnUnusable:
        remove_files(odb.workspace)
        return "none"
    try:
        return sync(odb, header.embedder, header.dim, force=True)
    except (AnnUnusable, OSError, RuntimeError, ValueError, MemoryError):
        remove_files(odb.workspace)
        return "removed"


def sync(odb: OrchestratorDB, embedder: str, dim: int, *, force: bool = False,
         count: int | None = None) -> str:
    """After a commit: build the file once ``ann_threshold`` vectors are stored
    (``count``, counted when not given), bring it up to date when ``FLUSH_EVERY`` were
    written since or any was deleted (``force``: whenever it is behind). Returns what it
    did: off, below, built, updated, current."""
    threshold = odb.memory.retrieval.ann_threshold
    if threshold == 0 and not force:
        return "off"
    with odb.snapshot():
        seq, deletes = _meta(odb)
        try:
            index, header = _writer_index(odb, embedder, dim)
        except AnnUnusable:
            if count is None:
                count = int(odb.sql("SELECT count(*) FROM memory_embeddings WHERE "
                                    "embedder = ? AND dim = ?", (embedder, dim))[0][0])
            if threshold == 0 or count < threshold:
                remove_files(odb.workspace)
                return "below"
            index = header = None
    if index is None or header is None or seq < header.seq or deletes < header.deletes:
        build(odb, embedder, dim)
        return "built"
    behind = seq - header.seq
    if deletes == header.deletes and (behind == 0 or (behind < FLUSH_EVERY and not force)):
        return "current"
    _update(odb, index, header)
    return "updated"


def _writer_index(odb: OrchestratorDB, embedder: str, dim: int) -> tuple[Any, Header]:
    held = odb.cache.get(_WRITER)
    path, _ = paths(odb.workspace)
    if held is not None and held[1].embedder == embedder and held[1].dim == dim \
            and path.exists() and path.stat().st_size == held[1].size:
        return held
    index, header = _open(odb.workspace, embedder, dim, view=False)
    odb.cache[_WRITER] = (index, header)
    return index, header


def _erase(index: Any, keys: np.ndarray, dim: int) -> None:
    """Remove ``keys`` and their vectors' bytes: usearch only marks a removed slot free
    (its vector stays in the file until the slot is reused), so as many zero vectors
    are added under keys no memory has, filling the freed slots, and removed again."""
    index.remove(keys)
    fillers = np.arange(_FILLER, _FILLER + len(keys), dtype=np.uint64)
    index.add(fillers, np.zeros((len(keys), dim), dtype=np.float32))
    index.remove(fillers)


def _update(odb: OrchestratorDB, index: Any, header: Header) -> None:
    """Remove the keys whose vectors went or changed, add the changed and new ones,
    rewrite the file (a removed vector leaves the file: it is compacted)."""
    with odb.snapshot():
        seq, deletes = _meta(odb)
        stale: set[int] = set()
        if deletes != header.deletes:
            stored = {int(k) for (k,) in odb.sql(
                "SELECT m.id FROM memories m JOIN memory_embeddings e ON e.memory_id = "
                "m.memory_id WHERE e.embedder = ? AND e.dim = ?", (header.embedder, header.dim))}
            stale = {int(k) for k in np.asarray(index.keys)} - stored
        changed = list(_rows(odb, header.embedder, header.dim, after=header.seq))
        moved = {int(k) for (k,) in odb.sql(
            "SELECT m.id FROM memories m JOIN memory_embeddings e ON e.memory_id = m.memory_id "
            "WHERE e.seq > ? AND (e.embedder != ? OR e.dim != ?)",
            (header.seq, header.embedder, header.dim))}
    again = {int(k) for keys, _ in changed for k in keys}
    gone = [k for k in sorted(stale | moved | again) if index.contains(k)]
    if gone:
        _erase(index, np.array(gone, dtype=np.uint64), header.dim)
    for keys, matrix in changed:
        index.add(keys, matrix)
    odb.cache[_WRITER] = (index, _save(odb.workspace, index, header.embedder, header.dim,
                                       seq, deletes))
