"""Export and import on real SQLite files with the real model: byte-identical exports,
the round trip into a fresh root, merging, and the Markdown view."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from memory_seed import CONTENTS, seed
from orchmem_testing import make_settings, settings_env

from orchmem.config import ImportRejected, Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.portability.export import FILES, export_jsonl, export_markdown
from orchmem.models.portability.importer import import_folder
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.db.stats import stats
from orchmem.models.storage.schema.tables import SCHEMA_VERSION
from orchmem.worker.cli.main import main

ORCH = "porter"
ROUND_TRIP = ("records", "sources", "edges")


@pytest.fixture
def source(tmp_path: Path, embedder: Embedder) -> dict[str, Any]:
    settings = make_settings(tmp_path / "a", "")
    databases = Databases(settings)
    odb = databases.open(ORCH)
    assert odb is not None
    ids = seed(odb, embedder)
    return {"settings": settings, "odb": odb, "ids": ids, "databases": databases}


def fresh(tmp_path: Path, name: str) -> tuple[Settings, OrchestratorDB]:
    settings = make_settings(tmp_path / name, "")
    odb = Databases(settings).open(ORCH)
    assert odb is not None
    return settings, odb


def read(folder: Path, kind: str) -> bytes:
    return (folder / FILES[kind]).read_bytes()


def test_the_same_database_exports_byte_identical_files(source: Any, tmp_path: Path) -> None:
    first = export_jsonl(source["odb"], tmp_path / "x1")
    second = export_jsonl(source["odb"], tmp_path / "x2")
    for kind in FILES:
        assert read(tmp_path / "x1", kind) == read(tmp_path / "x2", kind)
    assert first["sha256"] == second["sha256"]
    manifest = tomllib.loads((tmp_path / "x1" / "manifest.toml").read_text())
    assert manifest["orchestratorId"] == ORCH and manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["embedder_version"] and manifest["index_version"].startswith("fts5")
    assert manifest["restricted_left_out"] == 0
    records = [json.loads(line) for line in read(tmp_path / "x1", "records").splitlines()]
    assert [r["memoryId"] for r in records] == sorted(r["memoryId"] for r in records)
    assert manifest["counts"] == {"records": len(records), "sources": 9, "edges": 5,
                                  "audit": manifest["counts"]["audit"]}
    assert {r["status"] for r in records} == {"active", "superseded", "retracted"}
    assert {r["sourceType"] for r in records} >= {"workflow_output", "channel_transcript",
                                                 "ingest_file", "diagnostics", "manual"}
    assert sum(r["forgotten"] for r in records) == 1  # the hard-forgotten tombstone
    edges = [json.loads(line) for line in read(tmp_path / "x1", "edges").splitlines()]
    assert {e["edgeType"] for e in edges} == {"PartOf", "CausedBy", "RelatedTo", "Contradicts",
                                              "Updates"}
    audit = [json.loads(line) for line in read(tmp_path / "x1", "audit").splitlines()]
    assert [a["eventId"] for a in audit] == sorted(a["eventId"] for a in audit)


def test_round_trip_into_a_fresh_root_gives_identical_files_and_recall(
        source: Any, tmp_path: Path, embedder: Embedder) -> None:
    export_jsonl(source["odb"], tmp_path / "out")
    target_settings, target = fresh(tmp_path, "b")
    seen: list[tuple[int, int]] = []
    report = import_folder(target, tmp_path / "out", embedder=embedder, batch_size=4,
                           progress=lambda done, total: seen.append((done, total)))
    assert report["conflicts"] == [] and report["skipped"] == 0
    assert seen and seen[-1][0] == seen[-1][1] and len(seen) > 1  # batches of 4
    export_jsonl(target, tmp_path / "again")
    for kind in ROUND_TRIP:
        assert read(tmp_path / "out", kind) == read(tmp_path / "again", kind), kind
    audit = [json.loads(line) for line in read(tmp_path / "again", "audit").splitlines()]
    assert audit[-1]["op"] == "import"
    assert stats(target)["embeddingsMissing"] == 0

    assert ranks(source["databases"]) == ranks(Databases(target_settings, readonly=True))


def stored_vectors(odb: OrchestratorDB) -> dict[str, tuple[str, bytes]]:
    with odb.read():
        return {r[0]: (r[1], bytes(r[2])) for r in odb.sql(
            "SELECT memory_id, embedder, vector FROM memory_embeddings")}


def test_an_export_with_vectors_is_imported_without_embedding_again(
        source: Any, tmp_path: Path, embedder: Embedder) -> None:
    manifest = export_jsonl(source["odb"], tmp_path / "out", include_vectors=True)
    vectors = stored_vectors(source["odb"])
    assert manifest["counts"]["vectors"] == len(vectors) > 5
    target_settings, target = fresh(tmp_path, "b")
    seen: list[tuple[int, int]] = []
    report = import_folder(target, tmp_path / "out", embedder=embedder, batch_size=4,
                           progress=lambda done, total: seen.append((done, total)))
    assert seen == [] and report["vectorsFromFile"] == len(vectors)  # the model never ran
    assert stored_vectors(target) == vectors and stats(target)["embeddingsMissing"] == 0
    assert ranks(source["databases"]) == ranks(Databases(target_settings, readonly=True))

    export_jsonl(source["odb"], tmp_path / "plain")  # a later plain export drops the file
    assert not (tmp_path / "plain" / "vectors.jsonl").exists()
    assert not (tmp_path / "out" / "vectors.jsonl").read_text().count("NaN")


def test_vectors_of_another_embedder_are_computed_again(source: Any, tmp_path: Path,
                                                        embedder: Embedder) -> None:
    export_jsonl(source["odb"], tmp_path / "out", include_vectors=True)
    path, manifest = tmp_path / "out" / "vectors.jsonl", tmp_path / "out" / "manifest.toml"
    old_hash = hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_text(path.read_text().replace(embedder.version, "other-model:384:norm"))
    manifest.write_text(manifest.read_text().replace(
        old_hash, hashlib.sha256(path.read_bytes()).hexdigest()))
    _, target = fresh(tmp_path, "b")
    report = import_folder(target, tmp_path / "out", embedder=embedder, batch_size=64)
    assert report["vectorsFromFile"] == 0
    again, before = stored_vectors(target), stored_vectors(source["odb"])
    assert again.keys() == before.keys()  # embedded again by the same model: the same
    for memory_id, (version, blob) in again.items():  # vectors up to batching's rounding
        assert version == before[memory_id][0] and np.allclose(
            np.frombuffer(blob, np.float32), np.frombuffer(before[memory_id][1], np.float32),
            atol=1e-5)


def ranks(databases: Databases) -> list[tuple[str, int, int | None, int | None]]:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    out = []
    for query in ("where is the office", "what does the user prefer", "goals and todos"):
        bundle = recall(ORCH, query, databases=databases, now=now, include_inactive=True)
        out += [(n.memory.memory_id, n.rank, n.scores.vector_rank, n.scores.text_rank)
                for n in bundle.nodes]
    assert out
    return out


def test_importing_twice_adds_nothing(source: Any, tmp_path: Path, embedder: Embedder) -> None:
    export_jsonl(source["odb"], tmp_path / "out")
    _, target = fresh(tmp_path, "b")
    import_folder(target, tmp_path / "out", embedder=embedder, batch_size=64)
    report = import_folder(target, tmp_path / "out", embedder=embedder, batch_size=64)
    assert report["written"] == {"records": 0, "sources": 0, "edges": 0, "audit": 0,
                                 "vectors": 0}
    assert report["skipped"] == len(CONTENTS) + 1


def edit_content(folder: Path, memory_id: str, content: str) -> None:
    """Change one record and fix the manifest's hash, as an operator editing a file would."""
    import hashlib

    path = folder / FILES["records"]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        if line["memoryId"] == memory_id:
            line["content"] = content
    path.write_text("".join(json.dumps(r, sort_keys=True, ensure_ascii=False,
                                       separators=(",", ":")) + "\n" for r in lines))
    manifest = folder / "manifest.toml"
    text = manifest.read_text()
    old = tomllib.loads(text)["sha256"]["records.jsonl"]
    manifest.write_text(text.replace(old, hashlib.sha256(path.read_bytes()).hexdigest()))


def test_a_conflict_imports_nothing_unless_skipped(source: Any, tmp_path: Path,
                                                   embedder: Embedder) -> None:
    export_jsonl(source["odb"], tmp_path / "out")
    goal = source["ids"]["Goal"]
    edit_content(tmp_path / "out", goal, "Ship version three by July")
    odb: OrchestratorDB = source["odb"]
    before = stats(odb)
    with pytest.raises(ImportRejected) as caught:
        import_folder(odb, tmp_path / "out", embedder=embedder, batch_size=64)
    assert caught.value.reason == "conflict"
    assert caught.value.errors[0]["path"].startswith("records.jsonl:")
    assert goal in caught.value.errors[0]["message"]
    assert stats(odb) == before

    report = import_folder(odb, tmp_path / "out", embedder=embedder, batch_size=64,
                           skip_conflicts=True)
    assert len(report["conflicts"]) == 1 and report["written"]["records"] == 0
    assert stats(odb)["memories"] == before["memories"]


def test_markdown_groups_by_type(source: Any, tmp_path: Path) -> None:
    path = export_markdown(source["odb"], tmp_path / "md")
    text = path.read_text()
    assert text.startswith(f"# What orchestrator {ORCH} remembers")
    assert "## Goal (1)" in text and CONTENTS["Goal"] in text
    assert CONTENTS["Event"] not in text  # hard-forgotten


def test_the_cli_exports_and_imports(source: Any, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "cli-out"
    result = runner.invoke(main, ["--root", str(source["settings"].root), "export", "--orch",
                                  ORCH, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["counts"]["records"] == len(CONTENTS) + 1
    target_root = tmp_path / "cli-root"
    result = runner.invoke(main, ["--root", str(target_root), "import", "--orch", ORCH,
                                  str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["written"]["records"] == len(CONTENTS) + 1
    # stderr is no terminal here: the embedding's progress comes as lines, the last whole
    assert re.search(r"embedded (\d+) of \1 memories", result.stderr)
    result = runner.invoke(main, ["--root", str(target_root), "import", "--orch", "other",
                                  str(out), "--json"])
    assert result.exit_code == 1
    assert "the export belongs to orchestrator 'porter', not 'other'" in result.output
    assert not (target_root / "orchestrators" / "other").exists()



def test_orchmem_import_with_this_models_vectors_never_loads_the_model(
        source: Any, tmp_path: Path) -> None:
    """The command, in its own process: the model's ONNX export goes to
    ``embedding.cache_dir`` when the model loads, so an empty one shows it never did."""
    export_jsonl(source["odb"], tmp_path / "out", include_vectors=True)
    vectors = stored_vectors(source["odb"])
    target_settings = make_settings(tmp_path / "b", "",
                                    embedding={"cache_dir": str(tmp_path / "onnx-cache")})
    env = settings_env(target_settings)
    done = subprocess.run([sys.executable, "-m", "orchmem.worker", "import", "--orch", ORCH,
                           str(tmp_path / "out"), "--json"], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout[done.stdout.find("{"):])
    assert report["vectorsFromFile"] == len(vectors) > 5
    assert not (tmp_path / "onnx-cache").exists() or not any(
        (tmp_path / "onnx-cache").iterdir())
    target = Databases(target_settings, readonly=True).open(ORCH, create=False)
    assert target is not None and stored_vectors(target) == vectors
