"""The optional ``vectors.jsonl`` of an export: embeddings an import may reuse.

A vector is derived data: an import can always compute it again from the content,
and does by default. Re-embedding costs minutes at 100k memories, so ``orchmem export
--vectors`` may also write each live memory's stored vector, one line per memory,
sorted by memoryId::

    {"dim":384,"embedder":"all-MiniLM-L6-v2:384:norm","memoryId":"m-…","vector":"<base64>"}

``vector`` is the float32 little-endian bytes, base64. The manifest lists the file's
count and sha256 like the others. On import the file is used only where a line's
embedder is the importing embedder's version (same model, dimension, normalization);
every other memory is embedded again. The file is checked like the rest (hash,
bounded lines, fields, order, memoryIds of records.jsonl): a bad line imports nothing.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from orchmem.config import ImportRejected

VECTORS = "vectors.jsonl"
#: The widest vector accepted (MiniLM has 384; large models have 1,024 to 4,096).
MAX_DIM = 8192
#: The fields of a line.
VECTOR_KEYS = frozenset({"dim", "embedder", "memoryId", "vector"})


def _reject(where: str, message: str) -> ImportRejected:
    return ImportRejected("bad_field", f"{where}: {message}", [{"path": where,
                                                                "message": message}])


def decode_line(row: dict[str, Any], where: str) -> np.ndarray:
    """The vector of one line, its fields checked (ImportRejected naming the field); the
    memoryId is checked by the importer like every other file's ids."""
    if row.keys() != VECTOR_KEYS:
        raise _reject(where, f"fields must be {sorted(VECTOR_KEYS)}, got {sorted(row)[:8]}")
    dim = row["dim"]
    if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= MAX_DIM:
        raise _reject(f"{where}:dim", f"must be an integer in 1..{MAX_DIM}")
    if not isinstance(row["embedder"], str) or not 0 < len(row["embedder"]) <= 300:
        raise _reject(f"{where}:embedder", "must be a non-empty string of at most 300")
    text = row["vector"]
    if not isinstance(text, str) or len(text) > (dim * 4 + 2) // 3 * 4:
        raise _reject(f"{where}:vector", f"must be base64 of {dim} float32 values")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _reject(f"{where}:vector", "is not valid base64") from None
    vector = np.frombuffer(raw, dtype="<f4") if len(raw) == dim * 4 else None
    if vector is None or not np.isfinite(vector).all():
        raise _reject(f"{where}:vector", f"must be {dim} finite float32 values")
    return vector.astype(np.float32)
