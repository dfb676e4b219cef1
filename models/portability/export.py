"""Export: one orchestrator's memory as JSON-lines files a person can read and import.

``export_jsonl`` writes, into one folder:

- ``records.jsonl``: one memory per line, every column, sorted by memoryId;
- ``sources.jsonl``: every provenance row, by memoryId then capture order;
- ``edges.jsonl``: every edge, sorted by edgeId;
- ``audit.jsonl``: the memory_events log, oldest first;
- ``manifest.toml``: versions, counts and the sha256 of each file.

Lines are JSON with sorted keys and no blanks, so the same database always gives
byte-identical ``.jsonl`` files (only the manifest's ``exported_at`` changes). All four
are read in one snapshot. Restricted memories (sensitivity Restricted, once the schema
has that column) are left out with their sources, edges and audit events unless
``include_restricted``; the manifest counts what was left out. Crystals are derived
data (reflection compiles them again from the records after an import): they are left
out of the JSON-lines files with their PartOf edges and events, and counted as
``crystals_left_out``.

``export_markdown`` writes ``memories.md``: the same records grouped by type, for a person.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from orchmem.config import StorageError
from orchmem.models.core.shapes import MemoryType, format_ts, utc_now
from orchmem.models.portability.export_vectors import VECTORS
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories import portable
from orchmem.models.storage.reflection import units as reflection
from orchmem.models.storage.visibility import mentioned
from orchmem.models.workspace.private import open_private, private_dir

#: The files of an export, in the manifest's order.
FILES = {"records": "records.jsonl", "sources": "sources.jsonl", "edges": "edges.jsonl",
         "audit": "audit.jsonl"}
MANIFEST = "manifest.toml"
#: Bumped when the layout of the files changes (not when a column is added).
FORMAT_VERSION = 1


def dumps_line(row: dict[str, Any]) -> str:
    """One JSON line, the canonical way (sorted keys, no blanks, UTF-8 kept)."""
    return json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False) + "\n"


def _keep(kind: str, row: dict[str, Any], left_out: set[str]) -> bool:
    if not left_out:
        return True
    if kind in ("records", "sources"):
        return row["memoryId"] not in left_out
    if kind == "edges":
        return row["fromMemoryId"] not in left_out and row["toMemoryId"] not in left_out
    # an event also names memories in its before and after (a successor's "replaces")
    named = {*row["memoryIds"], *mentioned(json.dumps(row.get("before")),
                                           json.dumps(row.get("after")))}
    return not left_out.intersection(named)


def _write(path: Path, lines: Iterable[str]) -> tuple[int, str]:
    """Write ``lines`` to ``path`` via a temporary file; returns (lines, sha256)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    digest = hashlib.sha256()
    count = 0
    with open_private(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for line in lines:
            data = line.encode("utf-8")
            digest.update(data)
            fh.write(line)
            count += 1
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    return count, digest.hexdigest()


def export_jsonl(odb: OrchestratorDB, out_dir: Path, *, include_restricted: bool = False,
                 include_vectors: bool = False, tiers: Sequence[str] = ()) -> dict[str, Any]:
    """Write the four files and the manifest into ``out_dir`` (created when missing);
    with ``include_vectors``, also ``vectors.jsonl`` (export_vectors.py). ``tiers``
    keeps the memories of those tiers only (their edges among them, the audit events
    that name no other memory); none keeps every tier.

    Returns the manifest as a dict. Raises StorageError when the folder cannot be written.
    """
    try:
        private_dir(out_dir)
        with odb.read():
            left_out = set() if include_restricted else portable.restricted_ids(odb)
            crystals = reflection.crystal_ids(odb)
            derived = crystals | portable.other_tier_ids(odb, tiers)
            meta = portable.export_meta(odb)
            counts: dict[str, int] = {}
            hashes: dict[str, str] = {}
            for kind, name in FILES.items():
                lines = (dumps_line(row) for row in portable.rows(odb, kind)
                         if _keep(kind, row, left_out | derived))
                counts[kind], hashes[name] = _write(out_dir / name, lines)
            if include_vectors:
                counts["vectors"], hashes[VECTORS] = _write(out_dir / VECTORS, (
                    dumps_line(row) for row in portable.vector_rows(odb, left_out | derived)))
            else:
                (out_dir / VECTORS).unlink(missing_ok=True)  # not a stale one of before
    except OSError as exc:
        raise StorageError(f"cannot write the export into {out_dir}: {exc}") from exc
    manifest = {
        "format": "orchmem-export", "format_version": FORMAT_VERSION,
        "orchestratorId": odb.orchestrator_id, **meta,
        "index_version": portable.INDEX_VERSION, "exported_at": format_ts(utc_now()),
        "include_restricted": include_restricted, "restricted_left_out": len(left_out),
        "crystals_left_out": len(crystals), "counts": counts, "sha256": hashes,
        **({"tiers": list(tiers), "other_tiers_left_out": len(derived - crystals)}
           if tiers else {}),
    }
    text = toml_text(manifest)
    _write(out_dir / MANIFEST, [text])
    odb.log.write("exported", folder=str(out_dir), counts=counts,
                  restrictedLeftOut=len(left_out))
    return manifest


def toml_text(data: dict[str, Any]) -> str:
    """A flat TOML document with one level of tables (what a manifest needs).

    Strings are written as JSON strings, which are valid TOML basic strings.
    """
    head, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append(f"\n[{key}]\n" + "".join(
                f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in value.items()))
        else:
            head.append(f"{key} = {_toml_value(value)}\n")
    return "".join(head) + "".join(tables)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


def export_markdown(odb: OrchestratorDB, out_dir: Path, *, include_restricted: bool = False,
                    tiers: Sequence[str] = ()) -> Path:
    """Write ``memories.md``: every live memory (of ``tiers``, when given) grouped by
    type, with status, importance, confidence, provenance and dates. For reading, not
    for import."""
    path = out_dir / "memories.md"
    try:
        private_dir(out_dir)
        with odb.read():
            left_out = set() if include_restricted else portable.restricted_ids(odb)
            other = portable.other_tier_ids(odb, tiers)
            records = [r for r in portable.rows(odb, "records")
                       if r["memoryId"] not in left_out | other and not r.get("forgotten")]
        with open_private(path, "w", encoding="utf-8") as fh:
            _markdown(fh, odb.orchestrator_id, records, len(left_out))
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc}") from exc
    return path


def _markdown(fh: IO[str], orchestrator_id: str, records: list[dict[str, Any]],
              left_out: int) -> None:
    fh.write(f"# What orchestrator {orchestrator_id} remembers\n\n"
             f"{len(records)} memories"
             + (f" ({left_out} restricted left out)" if left_out else "") + ".\n")
    for memory_type in MemoryType:
        group = sorted((r for r in records if r["type"] == memory_type.value),
                       key=lambda r: (r["status"] != "active", -r["importance"], r["memoryId"]))
        if not group:
            continue
        fh.write(f"\n## {memory_type.value} ({len(group)})\n\n")
        for r in group:
            where = r.get("sourcePath") or r.get("conversationId") or r.get("workflowRunId") or ""
            mark = f"**{r['sensitivity'].upper()}** " if r.get("sensitivity") in (
                "confidential", "restricted") else ""  # marked, not hidden
            fh.write(f"- {mark}{' '.join(r['content'].split())}\n"
                     f"  - `{r['memoryId']}` {r['status']}, importance {r['importance']}, "
                     f"confidence {r['confidence']:g}, {r['sourceType']}"
                     + (f" ({where})" if where else "")
                     + f", created {r['createdAt']}, updated {r['updatedAt']}\n")
