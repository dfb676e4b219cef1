"""The ingest folder lifecycle on a real worker: ingest -> processed | rejected, exactly once."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from orchmem.config import MemoryDisabled, ScopeViolation, Settings
from orchmem.models.core.shapes import derive_id
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.worker.runtime.app import OrchmemCelery
from orchmem.worker.runtime.publish import publish

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


def memory_log(settings: Settings, orch: str, event: str) -> list[dict[str, Any]]:
    return [r for r in read_log(settings.runtime_root(orch) / "memory/logs/memory.log")
            if r["event"] == event]


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry below ``folder``: file bytes, or "<dir>" / "-> target" for the others."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            out[name] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            out[name] = "<dir>"
        else:
            out[name] = path.read_bytes()
    return out


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
    "wrongtype.json": ("schema_violation", json.dumps({"type": "facts", "content": "x"})),
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


@pytest.mark.parametrize("linked", ["after_first_open", "before_first_open"])
def test_a_symlinked_ingest_folder_is_outside_the_workspace(
        app: OrchmemCelery, settings: Settings, orch_id: str, tmp_path: Path,
        linked: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    (elsewhere / "secret.md").write_text("I prefer tea.")
    (elsewhere / "report.pdf").write_bytes(b"%PDF-1.4")
    (elsewhere / "sub" / "deeper.md").write_text("My name is Ada.")
    before = snapshot(elsewhere)
    ingest = settings.runtime_root(orch_id) / "memory" / "ingest"
    if linked == "after_first_open":
        Databases(settings).open(orch_id)
        shutil.rmtree(ingest)
    else:
        # Creating the database lays out the workspace: nothing below the link.
        ingest.parent.mkdir(parents=True)
    ingest.symlink_to(elsewhere)
    Databases(settings).open(orch_id)
    assert snapshot(elsewhere) == before
    _, pending = publish(app, INGEST_SCAN, orch_id, "ingest", {"idempotencyKey": "outside"})
    refused = pending.get(timeout=TIMEOUT, propagate=False)
    assert isinstance(refused, ScopeViolation)
    assert str(refused).startswith("outside_workspace: ") and str(elsewhere) in str(refused)
    assert snapshot(elsewhere) == before  # no processed/, rejected/, move or reason file
    assert [r["reason"] for r in memory_log(settings, orch_id, "ingest_refused")] == [
        "outside_workspace"]
    assert memory_log(settings, orch_id, "ingest_file") == []
    assert list_memories(Databases(settings).open(orch_id)) == []


def test_same_named_files_rejected_in_turn_never_overwrite_each_other(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    folder = ingest_dir(settings, orch_id)
    bodies = [b"%PDF-1.4 first", b"%PDF-1.4 second", b"%PDF-1.4 third"]
    for body in bodies:
        (folder / "report.pdf").write_bytes(body)
        assert by_file(scan(app, orch_id))["report.pdf"]["reason"] == "unsupported_extension"
    rejected = folder / "rejected"
    names = ["report.pdf", "report.2.pdf", "report.3.pdf"]
    assert sorted(p.name for p in rejected.iterdir()) == sorted(
        names + [f"{n}.reason.json" for n in names])
    assert [(rejected / n).read_bytes() for n in names] == bodies
    for name in names:
        manifest = json.loads((rejected / f"{name}.reason.json").read_text())
        assert manifest["file"] == "report.pdf"
        assert manifest["reason"] == "unsupported_extension" and manifest["sha256"] is None


def test_a_rejected_file_is_a_memory_log_line_with_its_reason(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    folder = ingest_dir(settings, orch_id)
    (folder / "broken.json").write_text('{"type": "Fact", "content": "cut')
    scan(app, orch_id)
    [line] = memory_log(settings, orch_id, "ingest_file")
    assert line["file"] == "broken.json" and line["outcome"] == "rejected"
    assert line["reason"] == "invalid_json" and line["detail"]
    assert line["orchestratorId"] == orch_id and len(line["sha256"]) == 64


def test_a_fifo_in_the_ingest_folder_is_rejected_without_blocking_the_worker(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    folder = ingest_dir(settings, orch_id)
    os.mkfifo(folder / "pipe.md")
    (folder / "after.md").write_text("I prefer green tea.")
    started = time.monotonic()
    _, pending = publish(app, INGEST_SCAN, orch_id, "ingest", {"idempotencyKey": "fifo"})
    result = by_file(dict(pending.get(timeout=30)))
    assert time.monotonic() - started < 30
    assert result["pipe.md"]["reason"] == "not_regular_file"
    assert result["after.md"]["outcome"] == "ingested"
    assert os.path.lexists(folder / "rejected" / "pipe.md")


def test_json_edges_between_records_by_key_are_stored(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    folder = ingest_dir(settings, orch_id)
    (folder / "graph.json").write_text(json.dumps({"memories": [
        {"type": "Goal", "content": "Ship the mobile app by June", "key": "goal"},
        {"type": "Decision", "content": "Use React Native for the mobile app", "key": "rn"}],
        "edges": [{"fromMemoryId": "rn", "toMemoryId": "goal", "edgeType": "CausedBy",
                   "weight": 0.6}]}))
    result = by_file(scan(app, orch_id))["graph.json"]
    assert result["outcome"] == "ingested" and len(result["memoryIds"]) == 2
    odb = Databases(settings).open(orch_id)
    ids = {n.type.value: n.memory_id for n in list_memories(odb)}
    with odb.bound():
        rows = odb.db.execute_sql(
            "SELECT from_memory_id, to_memory_id, edge_type, weight FROM memory_edges").fetchall()
    assert rows == [(ids["Decision"], ids["Goal"], "CausedBy", 0.6)]


def test_subfolders_of_the_ingest_folder_are_left_alone(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    folder = ingest_dir(settings, orch_id)
    (folder / "drafts" / "deep").mkdir(parents=True)
    (folder / "drafts" / "todo.md").write_text("- [ ] call the venue")
    (folder / "drafts" / "deep" / "facts.json").write_text(
        json.dumps({"type": "Fact", "content": "The hall seats 600"}))
    (folder / "top.md").write_text("I prefer window seats.")
    before = snapshot(folder / "drafts")
    result = scan(app, orch_id)
    assert {f["file"] for f in result["files"]} == {"top.md"}
    assert snapshot(folder / "drafts") == before
    assert [n.content for n in list_memories(Databases(settings).open(orch_id))] == [
        "I prefer window seats."]


def test_decision_and_name_lines_of_a_document_become_decision_and_identity(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    folder = ingest_dir(settings, orch_id)
    (folder / "kickoff.md").write_text("# Kickoff notes\n\n"
                                       "Decision: use Postgres for the billing service.\n\n"
                                       "My name is Ada Lovelace.\n")
    assert by_file(scan(app, orch_id))["kickoff.md"]["outcome"] == "ingested"
    nodes = list_memories(Databases(settings).open(orch_id))
    by_type = {n.type.value: n for n in nodes}
    assert sorted(by_type) == ["Decision", "Identity"] and len(nodes) == 2
    assert "use Postgres for the billing service" in by_type["Decision"].content
    assert "Ada Lovelace" in by_type["Identity"].content
    assert by_type["Identity"].source.source_type.value == "ingest_file"


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

    from orchmem.worker.runtime.app import create_app

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
