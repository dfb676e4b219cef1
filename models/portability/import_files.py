"""Reading an export folder for import: manifest, hashes, bounded lines, every field checked.

Nothing here touches a database. :func:`load` returns every line of the four files,
checked, or raises :class:`ImportRejected` (or ``ScopeViolation`` for an id of another
orchestrator) naming the file, the line and the field. Files are read in order:

1. ``manifest.toml``: its format, its orchestratorId (must be the target's), a schema
   version this release knows, a sha256 for each file;
2. every file's sha256 (read in 1 MiB chunks, never whole) against the manifest;
3. the lines, each read with a bounded ``readline``: a line longer than
   :data:`MAX_LINE_BYTES` is refused after reading that many bytes, however long it is;
4. each line's fields (types, enums, ranges, ids of this orchestrator), the export's
   order (sorted, no duplicates), the counts of the manifest, and that every source and
   edge names a memory of ``records.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchmem.config import ImportRejected, ScopeViolation
from orchmem.models.core.governance_fields import (
    MAX_TAG_CHARS,
    MAX_TAGS,
    check_metadata,
    check_tags,
)
from orchmem.models.core.shapes import (
    CONTROL_CHARS,
    check_memory_id,
    check_timestamp,
    orchestrator_tag,
)
from orchmem.models.portability.export import FILES, MANIFEST
from orchmem.models.portability.export_vectors import VECTORS, decode_line
from orchmem.models.portability.import_rules import (
    CHECKED_KEYS,
    ENUMS,
    MEMORY_IDS,
    RANGES,
    TIMESTAMPS,
    rows_ok,
    vectors_at_once,
)
from orchmem.models.storage.memories.portable import SCHEMA_VERSION, Column, columns

#: The longest line read: a record is at most ~100 k characters of content (the
#: settings' cap) plus its fields; audit lines carry a before and an after.
MAX_LINE_BYTES = 4 * 1024 * 1024
_CHUNK = 1024 * 1024
#: A memoryId outside a table's columns (audit lists, vectors.jsonl).
_MEMORY_ID = Column("memoryId", "memory_id", "text", False, False)


@dataclass
class Bundle:
    """Every checked line of an export folder, in file order."""

    manifest: dict[str, Any]
    lines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _reject(reason: str, where: str, message: str) -> ImportRejected:
    return ImportRejected(reason, f"{where}: {message}", [{"path": where, "message": message}])


def read_manifest(folder: Path, orchestrator_id: str) -> dict[str, Any]:
    """The parsed, checked manifest of ``folder``."""
    path = folder / MANIFEST
    try:
        manifest = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _reject("missing_file", MANIFEST, f"no {MANIFEST} in {folder}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _reject("manifest", MANIFEST, f"unreadable: {exc}") from exc
    if manifest.get("format") != "orchmem-export" or manifest.get("format_version") != 1:
        raise _reject("manifest", f"{MANIFEST}:format", "not an orchmem export (format 1)")
    owner = manifest.get("orchestratorId")
    if owner != orchestrator_id:
        raise ScopeViolation(f"{MANIFEST}: the export belongs to orchestrator {owner!r}, "
                             f"not {orchestrator_id!r}; import it into {owner!r}")
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise _reject("manifest", f"{MANIFEST}:schema_version",
                      f"{version!r} is newer than this orchmem ({SCHEMA_VERSION}): upgrade")
    hashes, counts = manifest.get("sha256"), manifest.get("counts")
    for kind, name in FILES.items():
        if not isinstance(hashes, dict) or not isinstance(hashes.get(name), str):
            raise _reject("manifest", f"{MANIFEST}:sha256", f"no sha256 for {name}")
        if not isinstance(counts, dict) or not isinstance(counts.get(kind), int):
            raise _reject("manifest", f"{MANIFEST}:counts", f"no count for {kind}")
    return manifest


def check_hashes(folder: Path, manifest: dict[str, Any], edited_ok: bool = False) -> None:
    """Refuse any file whose sha256 is not the manifest's; ``edited_ok``: except
    records.jsonl, the file meant to be edited (its lines are checked all the same)."""
    for kind, name in FILES.items():
        if not (edited_ok and kind == "records"):
            check_hash(folder, name, manifest["sha256"][name])


def check_hash(folder: Path, name: str, expected: str) -> None:
    """Refuse ``folder/name`` unless its sha256 is ``expected``."""
    digest = hashlib.sha256()
    try:
        with (folder / name).open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
    except FileNotFoundError:
        raise _reject("missing_file", name, f"missing from {folder}") from None
    except OSError as exc:
        raise _reject("missing_file", name, f"unreadable: {exc}") from exc
    if digest.hexdigest() != expected:
        raise _reject("hash_mismatch", name,
                      f"sha256 {digest.hexdigest()} differs from the manifest's "
                      f"{expected}: the file was changed or truncated"
                      + ("; to apply edits made to it, import with --apply-edits"
                         if name == FILES["records"] else ""))


def read_lines(path: Path, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each line, read with a bounded ``readline``."""
    name = path.name
    with path.open("rb") as fh:
        number = 0
        while raw := fh.readline(limit + 1):
            number += 1
            where = f"{name}:{number}"
            if len(raw) > limit:
                raise _reject("line_too_long", where, f"longer than {limit} bytes; refused "
                              "without reading the rest")
            if not raw.endswith(b"\n"):
                raise _reject("bad_json", where, "does not end with a newline: the file "
                              "was truncated")
            try:
                value = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise _reject("bad_json", where, f"not valid JSON: {exc}") from None
            if not isinstance(value, dict):
                raise _reject("bad_json", where, "must be a JSON object")
            yield number, value


def check_value(column: Column, value: Any, where: str, orchestrator_id: str) -> None:
    """One field against its column (kind, null) and the domain's enums, ranges and ids."""
    if value is None:
        if not column.null:
            raise _reject("bad_field", where, "must not be null")
        return
    kind = column.kind
    if kind == "text":
        if not isinstance(value, str) or "\x00" in value:
            raise _reject("bad_field", where, "must be a string without NUL bytes")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _reject("bad_field", where, f"must be an integer, got {type(value).__name__}")
    elif kind == "float" and (isinstance(value, bool) or not isinstance(value, int | float)
                              or not math.isfinite(value)):
        raise _reject("bad_field", where, f"must be a finite number, got {value!r}"[:200])
    key = column.key
    if key not in CHECKED_KEYS:  # a field with no rule beyond its kind
        return
    if key in ("tags", "metadata"):
        _check_governance(key, value, where)
    if key in ("content", "summary", "value") and CONTROL_CHARS.search(value):
        raise _reject("bad_field", where, "must be plain text without control characters")
    if key in ENUMS and value not in ENUMS[key]:
        raise _reject("bad_field", where, f"{value!r} is not one of {sorted(ENUMS[key])}"[:300])
    bounds = RANGES.get(key)
    if bounds and not bounds[0] <= value <= bounds[1]:
        raise _reject("bad_field", where, f"{value!r} is outside {bounds[0]}..{bounds[1]}")
    try:
        if key in TIMESTAMPS:
            check_timestamp(value)
        if key in MEMORY_IDS:
            check_memory_id(value, orchestrator_id, where)
    except ValueError as exc:  # MemoryValidationError too; ScopeViolation goes up
        raise _reject("bad_field", where, str(exc).split(": ", 1)[-1]) from None


def _check_governance(key: str, value: Any, where: str) -> None:
    """tags and metadata as a write would take them (models/core/governance_fields.py)."""
    try:
        if key == "tags":
            if not isinstance(value, list) or len(value) > MAX_TAGS or not all(
                    isinstance(t, str) and 0 < len(t) <= MAX_TAG_CHARS for t in value):
                raise ValueError(f"must be a list of at most {MAX_TAGS} short strings")
            check_tags(value)
        else:
            if not isinstance(value, dict):
                raise ValueError("must be a JSON object")
            check_metadata(value)
    except ValueError as exc:
        raise _reject("bad_field", where, str(exc)[:300]) from None


def _check_line(kind: str, cols: list[Column], row: dict[str, Any], where: str,
                orchestrator_id: str) -> None:
    known = {c.key for c in cols}
    unknown = sorted(set(row) - known)
    if unknown:
        raise _reject("bad_field", f"{where}:{unknown[0]}", "unknown field (written by a "
                      "newer schema, or not an orchmem export)")
    for column in cols:
        key = column.key
        if key not in row:
            if not column.optional:
                raise _reject("bad_field", f"{where}:{key}", "missing")
            continue
        value = row[key]
        if column.kind == "text" and key not in CHECKED_KEYS and type(value) is str \
                and "\x00" not in value:
            continue  # all check_value would ask of it
        check_value(column, value, f"{where}:{key}", orchestrator_id)
    if kind == "edges":
        edge_id = row["edgeId"]
        if not edge_id.startswith("e-") or edge_id[2:10] != orchestrator_tag(orchestrator_id):
            raise ScopeViolation(f"{where}:edgeId {edge_id[:80]!r} is not an edge of "
                                 f"orchestrator {orchestrator_id!r}")
    if kind == "audit":
        ids = row["memoryIds"]
        if not isinstance(ids, list):
            raise _reject("bad_field", f"{where}:memoryIds", "must be a list")
        for memory_id in ids:
            check_value(_MEMORY_ID, memory_id, f"{where}:memoryIds", orchestrator_id)


#: The key each file is sorted by, and whether equal keys may repeat.
_ORDER = {"records": ("memoryId", False), "sources": ("memoryId", True),
          "edges": ("edgeId", False), "audit": ("eventId", False)}


def _read_kind(folder: Path, kind: str, orchestrator_id: str) -> list[dict[str, Any]]:
    """Every line of one file, checked. The whole file is checked a column at a time
    (import_rules.py); only when that finds something is it checked line by line, which
    names the first bad line and field, in file order (a line that cannot be read is
    named after the lines before it)."""
    cols = columns(kind)
    out: list[dict[str, Any]] = []
    unreadable: ImportRejected | None = None
    try:
        out.extend(row for _, row in read_lines(folder / FILES[kind]))
    except ImportRejected as exc:
        unreadable = exc
    if unreadable is None and rows_ok(kind, cols, out, orchestrator_id, _ORDER[kind],
                                      check_value):
        return out
    _check_lines(kind, cols, out, orchestrator_id)
    if unreadable is not None:
        raise unreadable
    return out


def _check_lines(kind: str, cols: list[Column], rows: list[dict[str, Any]],
                 orchestrator_id: str) -> None:
    """Each line's fields, then its place in the file's order; the first error raised."""
    order_key, repeats = _ORDER[kind]
    previous: Any = None
    for number, row in enumerate(rows, start=1):
        where = f"{FILES[kind]}:{number}"
        _check_line(kind, cols, row, where, orchestrator_id)
        value = row[order_key]
        if previous is not None and (value < previous or (value == previous and not repeats)):
            raise _reject("order", f"{where}:{order_key}",
                          f"{value!r} comes after {previous!r}: the file was reordered or "
                          "holds a duplicate (an export is sorted)")
        previous = value


def load(folder: Path, orchestrator_id: str, edited_ok: bool = False) -> Bundle:
    """Every line of the export in ``folder``, checked (see the module docstring);
    ``edited_ok``: records.jsonl may differ from the manifest's hash."""
    manifest = read_manifest(folder, orchestrator_id)
    check_hashes(folder, manifest, edited_ok)
    bundle = Bundle(manifest=manifest)
    for kind, name in FILES.items():
        bundle.lines[kind] = _read_kind(folder, kind, orchestrator_id)
        if len(bundle.lines[kind]) != manifest["counts"][kind]:
            raise _reject("count_mismatch", name, f"{len(bundle.lines[kind])} lines, the "
                          f"manifest says {manifest['counts'][kind]}")
    _check_references(bundle)
    return bundle


def _check_references(bundle: Bundle) -> None:
    ids = {r["memoryId"] for r in bundle.lines["records"]}
    for kind, keys in (("sources", ("memoryId",)), ("edges", ("fromMemoryId", "toMemoryId"))):
        for number, row in enumerate(bundle.lines[kind], start=1):
            for key in keys:
                if row[key] not in ids:
                    raise _reject("dangling", f"{FILES[kind]}:{number}:{key}",
                                  f"{row[key]} is not in records.jsonl")


def declared_embedder(folder: Path) -> tuple[str, int] | None:
    """The embedder version and dimension of the first line of the export's
    ``vectors.jsonl``, read without checking the file (:func:`read_vectors` checks it
    all); None when there is no such file or line, or it does not say."""
    path = folder / VECTORS
    if not path.is_file():
        return None
    try:
        for _, row in read_lines(path):
            embedder, dim = row.get("embedder"), row.get("dim")
            if isinstance(embedder, str) and isinstance(dim, int) and not isinstance(dim, bool):
                return embedder, dim
            return None
    except ImportRejected:
        return None
    return None


def read_vectors(folder: Path, bundle: Bundle, orchestrator_id: str, embedder: str,
                 dim: int) -> dict[str, np.ndarray]:
    """The vectors of the optional ``vectors.jsonl`` made by ``embedder`` (its version,
    of ``dim`` dimensions; export_vectors.py), checked like the other files; empty when
    the export has no such file."""
    expected = bundle.manifest["sha256"].get(VECTORS)
    if expected is None:
        return {}
    check_hash(folder, VECTORS, str(expected))
    ids = {r["memoryId"] for r in bundle.lines["records"]}
    lines: list[dict[str, Any]] = []
    unreadable: ImportRejected | None = None
    try:
        lines.extend(row for _, row in read_lines(folder / VECTORS))
    except ImportRejected as exc:
        unreadable = exc
    out = None if unreadable else vectors_at_once(lines, ids, orchestrator_id, embedder, dim)
    if out is None:
        out = _vectors_by_line(lines, ids, orchestrator_id, embedder, dim)
    if unreadable is not None:
        raise unreadable
    if len(lines) != bundle.manifest["counts"].get("vectors"):
        raise _reject("count_mismatch", VECTORS, f"{len(lines)} lines, the manifest says "
                      f"{bundle.manifest['counts'].get('vectors')}")
    return out


def _vectors_by_line(lines: list[dict[str, Any]], ids: set[str], orchestrator_id: str,
                     embedder: str, dim: int) -> dict[str, np.ndarray]:
    """:func:`read_vectors`' lines one at a time: the first bad one is named."""
    out: dict[str, np.ndarray] = {}
    previous = ""
    for number, row in enumerate(lines, start=1):
        where = f"{VECTORS}:{number}"
        vector = decode_line(row, where)
        check_value(_MEMORY_ID, row["memoryId"], f"{where}:memoryId", orchestrator_id)
        memory_id = row["memoryId"]
        if memory_id <= previous:
            raise _reject("order", f"{where}:memoryId", f"{memory_id!r} comes after "
                          f"{previous!r}: the file was reordered or holds a duplicate")
        if memory_id not in ids:
            raise _reject("dangling", f"{where}:memoryId", f"{memory_id} is not in "
                          "records.jsonl")
        previous = memory_id
        if row["embedder"] == embedder:
            out[memory_id] = _fits(vector, embedder, dim, where)
    return out


def _fits(vector: np.ndarray, embedder: str, dim: int, where: str) -> np.ndarray:
    """A vector said to be ``embedder``'s must have its shape (and unit length when it
    normalizes): the vector index holds one shape per embedder."""
    if vector.shape[0] != dim:
        raise _reject("bad_field", f"{where}:dim", f"{embedder} has {dim} dimensions, "
                      f"not {vector.shape[0]}")
    if embedder.endswith(":norm") and abs(float(np.linalg.norm(vector)) - 1.0) > 1e-3:
        raise _reject("bad_field", f"{where}:vector", f"{embedder} vectors have unit length")
    return vector
