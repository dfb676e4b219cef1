"""The ingest folder lifecycle on a real worker: ingest -> processed | rejected, exactly once."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from orchmem.config import MemoryDisabled, Settings
from orchmem.models.database import Databases
from orchmem.models.memlog import read_log
from orchmem.models.schema import derive_id
from orchmem.models.store import list_memories
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.worker.app import OrchmemCelery
from orchmem.worker.publish import publish

pytestmark = pytest.mark.usefixtures("worker")
TIMEOUT = 120


def ingest_dir(settings: Settings, orch: str) -> Path:
    folder = settings.runtime_root(orch) / "memory" / "ingest"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def scan(app: OrchmemCelery, orch: str) -> dict[str, Any]:
    _, result = publish(app, INGEST_SCAN, orch, "ingest",
                        {"idempotencyKey": f"scan-{os.urandom(6).hex()}"})
    return dict(result.get(timeout=TIMEOUT))


def by_file(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["file"]: f for f in result["files"]}


def test_md_txt_and_json_files_become_typed_memories_with_provenance(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    folder = ingest_dir(settings, orch_id)
    (folder / "plan.md").write_text("# Launch plan\n\n## Decisions\n- Launch in Lisbon\n\n"
                                    "## Todo\n- [ ] book the venue\n\nGoal: 500 attendees.\n")
    (folder / "notes.txt").write_text("I prefer morning sessions.\n\nThe venue holds "
                                      "about six hundred people in its main hall.\n")
    (folder / "facts.json").write_text(json.dumps({"memories": [
        {"type": "Fact", "content": "The venue contract ends in May", "importance": 80,
         "key": "contract"},
        {"type": "Todo", "content": "Renew the venue contract", "key": "renew"}],
        "edges": [{"fromMemoryId": "renew", "toMemoryId": "contract",
                   "edgeType": "CausedBy"}]}))
    result = scan(app, orch_id)
    assert result["ingested"] == 3 and result["rejected"] == 0
    nodes = {n.content: n for n in list_memories(Databases(settings).open(orch_id))}
    assert {n.type.value for n in nodes.values()} == {"Decision", "Todo", "Goal", "Preference",
                                                      "Observation", "Fact"}
    assert nodes["Launch in Lisbon"].type.value == "Decision"
    assert nodes["book the venue"].type.value == "Todo"
    assert nodes["The venue contract ends in May"].importance == 80
    md = nodes["Launch in Lisbon"].source
    assert md.source_type.value == "ingest_file" and md.captured_by.value == "extractor"
    assert md.source_path == os.path.realpath(folder / "plan.md")
    assert nodes["The venue contract ends in May"].source.captured_by.value == "user"
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == []
    assert sorted(p.name for p in (folder / "processed").iterdir()) == [
        "facts.json", "notes.txt", "plan.md"]
    log = [r for r in read_log(settings.runtime_root(orch_id) / "memory/logs/memory.log")
           if r["event"] == "ingest_file"]
    assert sorted(r["file"] for r in log) == ["facts.json", "notes.txt", "plan.md"]


def _foreign_edge() -> str:
    return json.dumps({"memories": [{"type": "Fact", "content": "x", "key": "a"}], "edges": [
        {"fromMemoryId": "a", "toMemoryId": derive_id("m", "another-orch", "k", 0),
         "edgeType": "RelatedTo"}]})


REJECTS: dict[str, tuple[str, Any]] = {
    "report.pdf": ("unsupported_extension", b"%PDF-1.4"),
    "noext": ("unsupported_extension", b"hello"),
    "huge.txt": ("too_large", b"a" * (5 * 1024 * 1024 + 1)),
    "blank.md": ("empty", b"   \n\n\t\n"),
    "headings.md": ("empty", b"# Only\n## Headings\n"),
    "latin1.txt": ("not_utf8", "caf\u00e9 cr\u00e8me".encode("latin-1")),
    "nul.txt": ("binary", b"text\x00with nul"),
    "truncated.json": ("invalid_json", b'{"type": "Fact", "content": "cut'),
    "deep.json": ("invalid_json", b"[" * 5000 + b"]" * 5000),
    "wrongtype.json": ("schema_violation", json.dumps({"type": "fact", "content": "x"})),
    "badimportance.json": ("schema_violation",
                           json.dumps([{"type": "Fact", "content": "x", "importance": 500}])),
    "scalar.json": ("schema_violation", b"42"),
    "forged-path.json": ("schema_violation", json.dumps(
        {"type": "Fact", "content": "x", "source": {"sourcePath": "/etc/passwd"}})),
    "foreign-edge.json": ("scope_violation", _foreign_edge()),
    "many.json": ("too_many_memories", json.dumps(
        [{"type": "Fact", "content": f"fact {i}"} for i in range(2001)])),
}


def test_each_reason_code_is_produced_by_a_file_built_for_it(
        app: OrchmemCelery, settings: Settings, orch_id: str, tmp_path: Path) -> None:
    folder = ingest_dir(settings, orch_id)
    for name, (_, content) in REJECTS.items():
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    (tmp_path / "target.md").write_text("I prefer tea.")
    (folder / "link.md").symlink_to(tmp_path / "target.md")
    os.mkfifo(folder / "pipe.txt")
    result = by_file(scan(app, orch_id))
    expected = {name: reason for name, (reason, _) in REJECTS.items()}
    expected.update({"link.md": "symlink", "pipe.txt": "not_regular_file"})
    assert {name: result[name].get("reason") for name in expected} == expected
    rejected = folder / "rejected"
    for name, reason in expected.items():
        manifest = json.loads((rejected / f"{name}.reason.json").read_text())
        assert manifest["reason"] == reason and manifest["file"] == name
        assert set(manifest) == {"file", "sha256", "reason", "detail", "at"}
        assert os.path.lexists(rejected / name)
    assert "memories.0.importance" in result["badimportance.json"]["detail"]
    assert (tmp_path / "target.md").exists()  # the symlink's target was not touched
    assert list_memories(Databases(settings).open(orch_id)) == []


def test_a_symlinked_ingest_folder_is_outside_the_workspace(
        app: OrchmemCelery, settings: Settings, orch_id: str, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    memory = settings.runtime_root(orch_id) / "memory"
    memory.mkdir(parents=True)
    (memory / "ingest").symlink_to(elsewhere)
    (elsewhere / "secret.md").write_text("I prefer tea.")
    result = by_file(scan(app, orch_id))
    assert result["secret.md"]["reason"] == "outside_workspace"


def test_the_same_file_dropped_twice_is_ingested_once(app: OrchmemCelery, settings: Settings,
                                                      orch_id: str) -> None:
    folder = ingest_dir(settings, orch_id)
    body = "## Decisions\n- Use the blue logo\n"
    (folder / "a.md").write_text(body)
    first = by_file(scan(app, orch_id))["a.md"]
    (folder / "a.md").write_text(body)
    (folder / "copy.md").write_text(body)
    second = by_file(scan(app, orch_id))
    assert first["outcome"] == "ingested"
    assert second["a.md"]["outcome"] == second["copy.md"]["outcome"] == "duplicate"
    assert second["copy.md"]["memoryIds"] == first["memoryIds"]
    assert len(list_memories(Databases(settings).open(orch_id))) == 1
    assert sorted(p.name for p in (folder / "processed").iterdir()) == sorted(
        ["a.md", f"a.{first['sha256'][:12]}.md", "copy.md"])


def test_disabled_ingest_fails_with_a_clear_message(isolated: Any) -> None:
    from orchmem_testing import WorkerProcess

    from orchmem.worker.app import create_app

    settings = isolated(shards=1, orchestrators={"quiet": {"memory": {"ingest": {
        "enabled": False}}}})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        folder = ingest_dir(settings, "quiet")
        (folder / "a.md").write_text("I prefer tea.")
        _, result = publish(app, INGEST_SCAN, "quiet", "ingest", {"idempotencyKey": "s1"})
        value = result.get(timeout=TIMEOUT, propagate=False)
        assert isinstance(value, MemoryDisabled)
        assert "memory.ingest.enabled = false" in str(value)
        assert (folder / "a.md").exists()
    finally:
        worker.stop()
