"""Parsing an ingest file: its bytes become proposed memories (and edges), or a rejection.

``.json`` holds explicit records (one object, a list, or ``{"memories": [...],
"edges": [...]}``); ``.md`` and ``.txt`` go through the document extractor, called in
one place, :func:`extract_proposals`. Every memory is validated as a write-back one is,
with the file as its provenance (``sourceType=ingest_file``, ``sourcePath`` = the
file's canonical path in ``ingest/``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from orchmem.config import IngestRejected, MemoryValidationError, ScopeViolation
from orchmem.config.errors import ExtractionBudgetExceeded
from orchmem.config.memory_settings import IngestSettings
from orchmem.models.core.shapes import EdgeInput, MemoryInput, WireModel, validate
from orchmem.models.ingest.files import Candidate, read_checked, size_of
from orchmem.models.ingest.outcomes import Rejection, reject
from orchmem.models.workspace.folders import Workspace
from orchmem.models.writeback.extraction import ExtractionBudget, extract_document
from orchmem.models.writeback.reconcile import Proposed

#: Deepest JSON nesting accepted (json.loads recurses; a hostile file must not).
MAX_JSON_DEPTH = 64


class IngestFile(WireModel):
    memories: list[dict[str, Any]] = Field(default_factory=list)
    edges: list[EdgeInput] = Field(default_factory=list)


@dataclass
class Parsed:
    """A file that passed inspection, ready to commit."""

    path: Path
    name: str
    sha256: str
    size: int
    proposals: list[Proposed]
    edges: list[EdgeInput] = field(default_factory=list)


def decode(data: bytes, name: str) -> str:
    """The file's text; raises IngestRejected (``not_utf8``, ``binary``, ``empty``)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise reject("not_utf8", f"{name}: byte {exc.start} is not UTF-8 ({exc.reason})") from None
    if "\x00" in text or re.search(r"[\x01-\x08\x0e-\x1f]", text):
        raise reject("binary", f"{name} contains NUL or control bytes: not a text file")
    if not text.strip():
        raise reject("empty", f"{name} has no text")
    return text


def _json_depth(text: str) -> int:
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse(path: Path, text: str, workspace: Workspace, settings: IngestSettings,
          max_content_chars: int) -> tuple[list[Proposed], list[EdgeInput]]:
    """Proposed memories (and edges) of a file's text; raises IngestRejected.

    ``path`` is the file's place in ingest/: its provenance and its extension.
    Raises MemoryValidationError or ScopeViolation for a record breaking the schema.
    """
    canonical = os.path.realpath(path)
    provenance = {"sourceType": "ingest_file", "sourcePath": canonical}
    if path.suffix.lower() == ".json":
        proposals, edges = _parse_json(text, provenance, workspace, max_content_chars)
    else:
        proposals = extract_proposals(path.name, text, provenance, workspace, settings,
                                      max_content_chars)
        edges = []
    if not proposals:
        raise reject("empty", f"{path.name} holds no memory (only headings or blank lines?)")
    if len(proposals) > settings.max_memories_per_file:
        raise reject("too_many_memories", f"{len(proposals)} memories; the limit is "
                      f"{settings.max_memories_per_file} (memory.ingest.max_memories_per_file)")
    return proposals, edges


def extract_proposals(name: str, text: str, provenance: dict[str, str], workspace: Workspace,
                      settings: IngestSettings, max_content_chars: int) -> list[Proposed]:
    """The document extractor's memories of a ``.md``/``.txt`` file, validated.

    The one place ingest calls the extractor, within the file's work budget. Raises
    IngestRejected (``extraction_budget``: the rules needed more work than
    ``memory.ingest.extraction_budget_chars`` / ``_s``; ``too_many_memories``, counted
    before any is validated), MemoryValidationError or ScopeViolation for a candidate
    that breaks the schema.
    """
    budget = ExtractionBudget(settings.extraction_budget_chars, settings.extraction_budget_s)
    try:
        candidates = extract_document(text, budget)
    except ExtractionBudgetExceeded as exc:
        raise reject("extraction_budget", f"{name}: {exc.message} "
                     "(memory.ingest.extraction_budget_chars, extraction_budget_s)") from None
    if len(candidates) > settings.max_memories_per_file:
        raise reject("too_many_memories", f"{len(candidates)} memories; the limit is "
                     f"{settings.max_memories_per_file} (memory.ingest.max_memories_per_file)")
    proposals = []
    for index, candidate in enumerate(candidates):
        memory = validate(MemoryInput, {
            "type": candidate.type.value, "content": candidate.content[:max_content_chars],
            "importance": candidate.importance, "confidence": candidate.confidence,
            "source": {**provenance, "capturedBy": "extractor"}},
            workspace=workspace, max_content_chars=max_content_chars,
            where=f"candidate.{index}")
        proposals.append(Proposed.extracted(memory, candidate))
    return proposals


def _parse_json(text: str, provenance: dict[str, str], workspace: Workspace,
                max_content_chars: int) -> tuple[list[Proposed], list[EdgeInput]]:
    if _json_depth(text) > MAX_JSON_DEPTH:
        raise reject("invalid_json", f"nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise reject("invalid_json", str(exc)) from None
    if isinstance(data, dict) and ("memories" in data or "edges" in data):
        shape = validate(IngestFile, data)
        records, edges = shape.memories, shape.edges
    elif isinstance(data, dict):
        records, edges = [data], []
    elif isinstance(data, list):
        records, edges = data, []
    else:
        raise reject("schema_violation", f"expected an object or a list of objects, "
                      f"got {type(data).__name__}")
    proposals = []
    for index, record in enumerate(records):
        where = f"memories.{index}"
        if not isinstance(record, dict):
            raise reject("schema_violation", f"{where}: expected an object, "
                          f"got {type(record).__name__}")
        given = record.get("source") or {}
        if not isinstance(given, dict):
            raise reject("schema_violation", f"{where}.source: expected an object")
        for name in ("sourceType", "sourcePath"):
            if name in given and given[name] != provenance[name]:
                raise reject("schema_violation", f"{where}.source.{name}: an ingest record's "
                              f"{name} is the file itself ({provenance[name]})")
        source = {"capturedBy": "user", **given, **provenance}
        memory = validate(MemoryInput, {**record, "source": source}, workspace=workspace,
                          max_content_chars=max_content_chars, where=where)
        proposals.append(Proposed.explicit(memory))
    return proposals, edges


def inspect(candidate: Candidate, workspace: Workspace, settings: IngestSettings,
            max_content_chars: int) -> Parsed | Rejection:
    """Check, read, decode, parse and validate one claimed file; never raises for the file.

    Returns the file ready to commit, or why it is refused (reason ``CHANGED`` when it
    changed or vanished while being read).
    """
    try:
        data = read_checked(candidate.path, workspace, settings)
    except IngestRejected as exc:
        return Rejection(exc.reason, exc.detail, size=size_of(candidate.path))
    sha256 = hashlib.sha256(data).hexdigest()
    try:
        text = decode(data, candidate.name)
        proposals, edges = parse(workspace.ingest_dir / candidate.name, text, workspace,
                                 settings, max_content_chars)
    except IngestRejected as exc:
        return Rejection(exc.reason, exc.detail, sha256, len(data))
    except ScopeViolation as exc:
        return Rejection("scope_violation", str(exc)[:1000], sha256, len(data))
    except MemoryValidationError as exc:
        return Rejection("schema_violation", exc.message[:1000], sha256, len(data))
    return Parsed(path=candidate.path, name=candidate.name, sha256=sha256, size=len(data),
                  proposals=proposals, edges=edges)
