"""Import of damaged and hostile folders: each gets a clear error naming file, line and
field, and nothing is written."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import struct
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memory_seed import seed
from orchmem_testing import make_settings

from orchmem.config import ImportRejected, OrchmemError, ScopeViolation
from orchmem.models.core.shapes import derive_id
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.portability.export import FILES, export_jsonl
from orchmem.models.portability.import_files import MAX_LINE_BYTES, read_lines
from orchmem.models.portability.importer import import_folder
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.db.stats import stats

ORCH = "porter"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    odb = Databases(make_settings(root / "a", "")).open(ORCH)
    assert odb is not None
    seed(odb, embedder)
    return export_jsonl(odb, root / "out") and root / "out"


@pytest.fixture
def target(tmp_path: Path) -> Iterator[OrchestratorDB]:
    databases = Databases(make_settings(tmp_path / "b", ""))
    odb = databases.open(ORCH)
    assert odb is not None
    yield odb
    databases.close_all()


@pytest.fixture
def folder(tmp_path: Path, exported: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    return copy


def lines(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / FILES[kind]).read_text().splitlines()]


def rewrite(folder: Path, kind: str, text: str | bytes, *, fix_hash: bool = True) -> None:
    """Replace one file; with ``fix_hash`` the manifest is made to match, as an attacker
    who knows the format would."""
    path = folder / FILES[kind]
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    if fix_hash:
        manifest = folder / "manifest.toml"
        body = manifest.read_text()
        old = tomllib.loads(body)["sha256"][FILES[kind]]
        manifest.write_text(body.replace(old, hashlib.sha256(path.read_bytes()).hexdigest()))


def dump(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def refused(target: OrchestratorDB, folder: Path, embedder: Embedder,
            error: type[OrchmemError] = ImportRejected) -> Any:
    before = stats(target)
    with pytest.raises(error) as caught:
        import_folder(target, folder, embedder=embedder, batch_size=64)
    after = stats(target)
    assert after == before and after["memories"] == 0 and after["events"] == 0
    return caught.value


def test_a_tampered_file_fails_its_hash(target: Any, folder: Path, embedder: Embedder) -> None:
    body = (folder / FILES["records"]).read_text().replace("Porto", "Lisbon")
    rewrite(folder, "records", body, fix_hash=False)
    error = refused(target, folder, embedder)
    assert isinstance(error, ImportRejected) and error.reason == "hash_mismatch"
    assert "records.jsonl" in str(error)


def test_a_truncated_file_fails_its_hash_or_its_last_line(target: Any, folder: Path,
                                                          embedder: Embedder) -> None:
    data = (folder / FILES["sources"]).read_bytes()
    rewrite(folder, "sources", data[: len(data) // 2], fix_hash=False)
    assert refused(target, folder, embedder).reason == "hash_mismatch"
    rewrite(folder, "sources", data[: len(data) // 2])
    error = refused(target, folder, embedder)
    assert error.reason == "bad_json" and "truncated" in str(error)
    cut = data[: data.rindex(b"\n", 0, len(data) - 1) + 1]  # whole lines, one fewer
    rewrite(folder, "sources", cut)
    assert refused(target, folder, embedder).reason == "count_mismatch"


def test_a_reordered_file_is_refused(target: Any, folder: Path, embedder: Embedder) -> None:
    rows = lines(folder, "records")
    rewrite(folder, "records", dump(rows[::-1]))
    error = refused(target, folder, embedder)
    assert error.reason == "order"
    assert error.errors[0]["path"] == "records.jsonl:2:memoryId"


def test_bad_json_names_its_line(target: Any, folder: Path, embedder: Embedder) -> None:
    text = (folder / FILES["edges"]).read_text().splitlines(keepends=True)
    text[1] = text[1][:-3] + "\n"
    rewrite(folder, "edges", "".join(text))
    error = refused(target, folder, embedder)
    assert error.reason == "bad_json" and "edges.jsonl:2" in str(error)


@pytest.mark.parametrize("field,value,reason", [
    ("importance", 101, "bad_field"),
    ("importance", "high", "bad_field"),
    ("confidence", True, "bad_field"),
    ("type", "Secret", "bad_field"),
    ("status", "deleted", "bad_field"),
    ("createdAt", "yesterday", "bad_field"),
    ("content", None, "bad_field"),
    ("content", "bell \x07 inside", "bad_field"),
    ("colour", "blue", "bad_field"),
])
def test_a_bad_field_names_line_and_field(target: Any, folder: Path, embedder: Embedder,
                                          field: str, value: Any, reason: str) -> None:
    rows = lines(folder, "records")
    rows[2][field] = value
    rewrite(folder, "records", dump(rows))
    error = refused(target, folder, embedder)
    assert error.reason == reason
    assert error.errors[0]["path"] == f"records.jsonl:3:{field}"


@pytest.mark.parametrize("kind,field", [("records", "memoryId"), ("sources", "memoryId"),
                                        ("edges", "toMemoryId"), ("audit", "memoryIds")])
def test_ids_of_another_orchestrator_are_refused(target: Any, folder: Path,
                                                 embedder: Embedder, kind: str,
                                                 field: str) -> None:
    rows = lines(folder, kind)
    stranger = derive_id("m", "someone-else", "k", 0)
    rows[0][field] = [stranger] if field == "memoryIds" else stranger
    rewrite(folder, kind, dump(rows))
    error = refused(target, folder, embedder, ScopeViolation)
    assert f"{FILES[kind]}:1:{field}" in str(error)


def test_a_manifest_of_another_orchestrator_is_refused(target: Any, folder: Path,
                                                       embedder: Embedder) -> None:
    manifest = folder / "manifest.toml"
    manifest.write_text(manifest.read_text().replace(f'"{ORCH}"', '"someone-else"'))
    assert "someone-else" in str(refused(target, folder, embedder, ScopeViolation))


def test_a_100_mb_line_is_refused_without_reading_it_whole(
        target: Any, folder: Path, embedder: Embedder) -> None:
    path = folder / FILES["records"]
    with path.open("ab") as fh:
        fh.write(b'{"content":"')
        block = b"x" * (1 << 20)
        for _ in range(100):
            fh.write(block)
        fh.write(b'"}\n')
    rewrite(folder, "records", path.read_bytes())
    error = refused(target, folder, embedder)
    assert error.reason == "line_too_long"
    assert str(MAX_LINE_BYTES) in str(error)


def test_lines_are_read_with_a_bound(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"a":1}\n' + b"y" * 5000 + b"\n")
    reads: list[int] = []
    with pytest.raises(ImportRejected, match=r"records\.jsonl:2: longer than 100 bytes"):
        for number, _ in read_lines(path, limit=100):
            reads.append(number)
    assert reads == [1]


MISSING: list[tuple[str, Callable[[Path], None]]] = [
    ("manifest", lambda f: (f / "manifest.toml").unlink()),
    ("edges", lambda f: (f / FILES["edges"]).unlink()),
]


@pytest.mark.parametrize("name,damage", MISSING)
def test_a_missing_file_is_refused(target: Any, folder: Path, embedder: Embedder, name: str,
                                   damage: Callable[[Path], None]) -> None:
    damage(folder)
    assert refused(target, folder, embedder).reason == "missing_file"


def test_an_edge_to_a_memory_not_in_the_export_is_refused(target: Any, folder: Path,
                                                          embedder: Embedder) -> None:
    rows = lines(folder, "edges")
    rows[0]["toMemoryId"] = derive_id("m", ORCH, "nowhere", 0)
    rewrite(folder, "edges", dump(rows))
    error = refused(target, folder, embedder)
    assert error.reason == "dangling"
    assert error.errors[0]["path"] == "edges.jsonl:1:toMemoryId"


@pytest.fixture
def with_vectors(tmp_path: Path, exported: Path, embedder: Embedder) -> Path:
    """An export with vectors.jsonl (made from the exported folder's own records)."""
    source = Databases(make_settings(tmp_path / "v", ""))
    odb = source.open(ORCH)
    assert odb is not None
    import_folder(odb, exported, embedder=embedder, batch_size=64)
    export_jsonl(odb, tmp_path / "vectors", include_vectors=True)
    source.close_all()
    return tmp_path / "vectors"


def rewrite_vectors(folder: Path, rows: list[dict[str, Any]], count: int | None = None
                    ) -> None:
    path, manifest = folder / "vectors.jsonl", folder / "manifest.toml"
    body = manifest.read_text()
    old = tomllib.loads(body)
    path.write_text(dump(rows))
    body = body.replace(old["sha256"]["vectors.jsonl"],
                        hashlib.sha256(path.read_bytes()).hexdigest())
    if count is not None:
        body = body.replace(f'"vectors" = {old["counts"]["vectors"]}', f'"vectors" = {count}')
    manifest.write_text(body)


def _nan(dim: int) -> str:
    return base64.b64encode(struct.pack(f"<{dim}f", *([float("nan")] * dim))).decode()


@pytest.mark.parametrize("change,where", [
    (lambda r: r | {"dim": 2}, "vectors.jsonl:1:vector"),
    (lambda r: r | {"vector": "not base64!"}, "vectors.jsonl:1:vector"),
    (lambda r: r | {"vector": _nan(r["dim"])}, "vectors.jsonl:1:vector"),
    (lambda r: r | {"dim": True}, "vectors.jsonl:1:dim"),
    (lambda r: r | {"extra": 1}, "vectors.jsonl:1"),
    (lambda r: r | {"memoryId": r["memoryId"][:-1] + "0"}, "vectors.jsonl:1:memoryId"),
    (lambda r: r | {"vector": base64.b64encode(struct.pack(f"<{r['dim']}f",
                                                          *([0.5] * r["dim"]))).decode()},
     "vectors.jsonl:1:vector"),  # the embedder's vectors have unit length
])
def test_a_bad_vectors_line_names_its_field_and_imports_nothing(
        target: Any, with_vectors: Path, embedder: Embedder, change: Any, where: str) -> None:
    rows = [json.loads(x) for x in (with_vectors / "vectors.jsonl").read_text().splitlines()]
    rewrite_vectors(with_vectors, [change(rows[0]), *rows[1:]])
    error = refused(target, with_vectors, embedder)
    assert where in str(error), str(error)


def test_a_tampered_short_or_reordered_vectors_file_is_refused(
        target: Any, with_vectors: Path, embedder: Embedder) -> None:
    path = with_vectors / "vectors.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text(dump(rows[1:]))
    assert refused(target, with_vectors, embedder).reason == "hash_mismatch"
    rewrite_vectors(with_vectors, rows[1:])
    assert refused(target, with_vectors, embedder).reason == "count_mismatch"
    rewrite_vectors(with_vectors, [rows[1], rows[0], *rows[2:]])
    assert refused(target, with_vectors, embedder).reason == "order"
