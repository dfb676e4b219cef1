"""The rules an export's fields obey, and a check of a whole file a column at a time.

:func:`import_files.check_value` checks one field and names it when it is wrong. An
import reads tens of thousands of lines of about twenty fields each, so
:func:`rows_ok` first asks the same questions of each column as a whole (types with
one pass, enums as a set, ranges as a min and max, control characters with one
search of the joined text, each distinct timestamp once). It only answers whether
every line passes: when it says no, the caller checks line by line, which finds and
names the first error exactly as before. It may say no where every line is fine (a
value it does not know how to check quickly); it never says yes where a line is not.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Sequence
from itertools import pairwise
from operator import itemgetter
from typing import Any

import numpy as np

from orchmem.models.core.governance_fields import Scope, Sensitivity, Tier
from orchmem.models.core.shapes import (
    CONTROL_CHARS,
    MEMORY_ID_PATTERN,
    CapturedBy,
    EdgeType,
    MemoryType,
    SourceType,
    Status,
    orchestrator_tag,
)
from orchmem.models.portability.export_vectors import MAX_DIM, VECTOR_KEYS
from orchmem.models.storage.memories.portable import Column

ENUMS: dict[str, frozenset[str]] = {
    "type": frozenset(t.value for t in MemoryType),
    "status": frozenset(s.value for s in Status),
    "sourceType": frozenset(s.value for s in SourceType),
    "capturedBy": frozenset(c.value for c in CapturedBy),
    "edgeType": frozenset(e.value for e in EdgeType),
    "tier": frozenset(t.value for t in Tier),
    "scope": frozenset(s.value for s in Scope),
    "sensitivity": frozenset(s.value for s in Sensitivity),
}
RANGES = {"importance": (0, 100), "confidence": (0.0, 1.0), "weight": (0.0, 1.0),
          "forgotten": (0, 1), "stated": (0, 1)}
TIMESTAMPS = frozenset({"createdAt", "updatedAt", "capturedAt", "at", "validFrom",
                        "validTo"})
MEMORY_IDS = frozenset({"memoryId", "fromMemoryId", "toMemoryId"})
#: The keys ``check_value`` checks beyond their kind.
CHECKED_KEYS = frozenset({"tags", "metadata", "content", "summary", "value", *ENUMS,
                          *RANGES, *TIMESTAMPS, *MEMORY_IDS})
_TEXTS = frozenset({"content", "summary", "value"})
_MEMORY_ID_RE = re.compile(MEMORY_ID_PATTERN)
_MISSING = object()

#: ``check_value(column, value, where, orchestrator_id)``: raises when the value is bad.
Check = Callable[[Column, Any, str, str], None]


def rows_ok(kind: str, cols: Sequence[Column], rows: Sequence[dict[str, Any]],
            orchestrator_id: str, order: tuple[str, bool], check: Check) -> bool:
    """Whether every line of ``rows`` passes every check of its file: no unknown or
    missing field, each value by its column's rules, the ids of this orchestrator, and
    the file's order (``order``: the sort key, and whether equal keys may repeat)."""
    known = {c.key for c in cols}
    if not all(row.keys() <= known for row in rows):
        return False
    tag = orchestrator_tag(orchestrator_id)
    whole = all(len(row) == len(known) for row in rows)  # every field in every line
    for column in cols:
        values = (list(map(itemgetter(column.key), rows)) if whole
                  else [row.get(column.key, _MISSING) for row in rows])
        if not _column_ok(column, values, tag, orchestrator_id, check):
            return False
    if kind == "edges" and not all(e[:2] == "e-" and e[2:10] == tag
                                   for e in (row["edgeId"] for row in rows)):
        return False
    if kind == "audit":
        lists = [row["memoryIds"] for row in rows]
        if not all(type(ids) is list for ids in lists) or not _memory_ids_ok(
                [m for ids in lists for m in ids], tag):
            return False
    key, repeats = order
    keys = [row[key] for row in rows]
    if repeats:
        return all(a <= b for a, b in pairwise(keys))
    return all(a < b for a, b in pairwise(keys))


def _column_ok(column: Column, values: list[Any], tag: str, orchestrator_id: str,
               check: Check) -> bool:
    given = [v for v in values if v is not _MISSING]
    if not column.optional and len(given) != len(values):
        return False
    present = [v for v in given if v is not None]
    if not column.null and len(present) != len(given):
        return False
    if not _kind_ok(column.kind, present):
        return False
    key = column.key
    if key not in CHECKED_KEYS or not present:
        return True
    if key in ("tags", "metadata"):
        empty = list if key == "tags" else dict
        return all(type(v) is empty if not v else _passes(check, column, v, orchestrator_id)
                   for v in present)
    if key in _TEXTS and CONTROL_CHARS.search("".join(present)):
        return False  # one character class: the joined text matches where a value does
    if key in ENUMS and not set(present) <= ENUMS[key]:
        return False
    bounds = RANGES.get(key)
    if bounds and not bounds[0] <= min(present) <= max(present) <= bounds[1]:
        return False
    if key in TIMESTAMPS and not all(_passes(check, column, v, orchestrator_id)
                                     for v in set(present)):
        return False
    return key not in MEMORY_IDS or _memory_ids_ok(present, tag)


def _kind_ok(kind: str, values: list[Any]) -> bool:
    if kind == "text":
        return all(type(v) is str for v in values) and "\x00" not in "".join(values)
    if kind == "int":
        return all(type(v) is int for v in values)
    if kind == "float":
        return all(type(v) is float or type(v) is int for v in values) and all(
            map(math.isfinite, values))
    return True


def _memory_ids_ok(values: list[Any], tag: str) -> bool:
    return all(type(v) is str and _MEMORY_ID_RE.fullmatch(v) is not None and v[2:10] == tag
               for v in values)


def _passes(check: Check, column: Column, value: Any, orchestrator_id: str) -> bool:
    try:
        check(column, value, "", orchestrator_id)
    except Exception:  # any refusal: the line-by-line check names it
        return False
    return True


def vectors_at_once(rows: Sequence[dict[str, Any]], ids: set[str], orchestrator_id: str,
                    embedder: str, dim: int) -> dict[str, np.ndarray] | None:
    """What ``read_vectors`` returns for these lines of ``vectors.jsonl``, decoded as one
    matrix; None when any line would not pass, or when the lines are not all of one
    shape without base64 padding (the caller then goes line by line)."""
    if not rows or not all(row.keys() == VECTOR_KEYS for row in rows):
        return None
    width = rows[0]["dim"]
    if type(width) is not int or not 1 <= width <= MAX_DIM or (width * 4) % 3 or not all(
            row["dim"] == width and type(row["dim"]) is int for row in rows):
        return None
    chars = width * 4 // 3 * 4  # base64 of width float32 values, no padding
    texts = [row["vector"] for row in rows]
    names = [row["embedder"] for row in rows]
    memory_ids = [row["memoryId"] for row in rows]
    if not (all(type(t) is str and len(t) == chars for t in texts)
            and all(type(n) is str and 0 < len(n) <= 300 for n in names)
            and _memory_ids_ok(memory_ids, orchestrator_tag(orchestrator_id))
            and all(a < b for a, b in pairwise(memory_ids))
            and set(memory_ids) <= ids):
        return None
    matrix = _decoded(texts, width)
    if matrix is None:
        return None
    mine = [i for i, name in enumerate(names) if name == embedder]
    if mine and width != dim:
        return None
    if mine and embedder.endswith(":norm") and not _unit(
            matrix if len(mine) == len(rows) else matrix[mine]):
        return None
    return {memory_ids[i]: matrix[i] for i in mine}


#: Lines decoded at a time: a few megabytes of text, not the whole file at once.
_CHUNK = 4096


def _decoded(texts: list[str], width: int) -> np.ndarray | None:
    """The (lines, width) float32 matrix of base64 texts without padding, each of
    ``width`` values; None when one is not valid base64 or holds a value that is not
    finite."""
    matrix = np.empty((len(texts), width), dtype=np.float32)
    for start in range(0, len(texts), _CHUNK):
        part = texts[start:start + _CHUNK]
        try:
            raw = base64.b64decode("".join(part), validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(raw) != len(part) * width * 4:
            return None
        block = np.frombuffer(raw, dtype="<f4").reshape(len(part), width)
        if not np.isfinite(block).all():
            return None
        matrix[start:start + len(part)] = block
    return matrix


def _unit(matrix: np.ndarray) -> bool:
    """Whether every row has unit length, within a margin below the line-by-line check's
    1e-3 (float32 sums of squares are exact to about 1e-6 here): a norm near the bound is
    left to that check."""
    for start in range(0, len(matrix), _CHUNK):
        block = matrix[start:start + _CHUNK]
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        if not (np.abs(norms - 1.0) <= 0.9e-3).all():
            return False
    return True
