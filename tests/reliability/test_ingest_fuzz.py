"""1,000+ generated malformed files through a real worker's scan: every one is handled
exactly once and ends in processed/ or rejected/ with the reason its kind calls for, no
scan fails, the worker survives, and valid files' memories are all there."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from typing import Any

import pytest
from orchmem_testing import wait_until

from orchmem.config import Settings
from orchmem.models.ingest.outcomes import REASONS
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import OrchmemCelery
from orchmem.worker.runtime.publish import publish

pytestmark = pytest.mark.usefixtures("worker")
MALFORMED = 1000
VALID = 60
IGNORED = [".hidden.md", "upload.json.part", "draft.md.tmp", "notes.md~"]
#: What a file may end as: a rejection reason, or PROCESSED (ingested or duplicate).
PROCESSED = "processed"
#: Field values the schema accepts although the generator meant them as wrong.
ACCEPTED_SUBSTITUTIONS = [("content", "xxx"), ("importance", 7)]


def odd_name(rng: random.Random, i: int, ext: str) -> str:
    stems = [f"f{i}", f"with space {i}", f"ünïcødé-{i}", f"emoji-🧠-{i}", f"-dash{i}",
             f"quote'\"$;{i}", f"new\nline{i}", "x" * rng.randint(50, 200) + str(i),
             f"UPPER{i}", f"dots.in.name.{i}"]
    return rng.choice(stems) + ext


def malformed(rng: random.Random) -> tuple[str, bytes, set[str] | None]:
    """``(extension, bytes, the outcomes its kind allows)``; None: not predictable."""
    kind = rng.randrange(12)
    ext = rng.choice([".json", ".md", ".txt", ".json", ".bin", ".JSON", ""])
    record = {"type": "Fact", "content": "a fact", "importance": 50}
    if kind == 0:
        data = rng.randbytes(rng.randint(0, 2000))
        return ext, data, random_bytes_outcome(ext, data)
    if kind == 1:
        text = json.dumps([record] * rng.randint(1, 5))
        cut = text[: rng.randint(0, len(text) - 1)]
        return ".json", cut.encode(), {"invalid_json" if cut else "empty"}
    if kind == 2:
        bad = dict(record)
        name = rng.choice(["type", "content", "importance", "confidence"])
        value: object = rng.choice([7, None, [], {}, "x" * 3, -1, 1e309, True])
        bad[name] = value
        accepted = (name, value) in ACCEPTED_SUBSTITUTIONS
        return ".json", json.dumps([bad]).encode(), {
            PROCESSED if accepted else "schema_violation"}
    if kind == 3:
        return ".json", json.dumps({**record, "content": "y" * 20_000}).encode(), {
            "schema_violation"}
    if kind == 4:
        depth = rng.randint(65, 5000)
        return ".json", (b"[" * depth + b"]" * depth), {"invalid_json"}
    if kind == 5:
        return rng.choice([".txt", ".md"]), b"text with a NUL\x00 byte in it", {"binary"}
    if kind == 6:
        return ".json", json.dumps({**record, "surprise": "field"}).encode(), {
            "schema_violation"}
    if kind == 7:
        return rng.choice([".json", ".md", ".txt"]), rng.choice([b"", b"   \n", b"\t\t"]), {
            "empty"}
    if kind == 8:
        return ".json", rng.choice([b"null", b"42", b'"string"', b"true", b"[1, 2]"]), {
            "schema_violation"}
    if kind == 9:
        return ".txt", "I prefer tea".encode("utf-16"), {"not_utf8"}  # starts with FF FE
    if kind == 10:
        return ".md", b"# Title\n## Subtitle\n### Another\n", {"empty"}
    return ".json", json.dumps({**record, "source": {"sourcePath": "/etc/passwd"}}).encode(), {
        "schema_violation"}


def random_bytes_outcome(ext: str, data: bytes) -> set[str] | None:
    if ext.lower() not in (".json", ".md", ".txt"):
        return {"unsupported_extension"}
    if not data:
        return {"empty"}
    # 16 random bytes are valid UTF-8 without a control byte once in millions; fewer can
    # be a little text (empty, invalid JSON, a number...): no single outcome to expect.
    return {"not_utf8", "binary"} if len(data) >= 16 else None


def all_scans(app: OrchmemCelery, first: dict[str, Any]) -> list[dict[str, Any]]:
    """The first scan's result and those of the follow-ups it chained, in order."""
    results = [first]
    while results[-1]["followUp"]:
        results.append(app.AsyncResult(results[-1]["followUp"]).get(timeout=240))
    return results


def test_a_thousand_malformed_files_each_end_processed_or_rejected(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    rng = random.Random(1234)
    folder = settings.runtime_root(orch_id) / "memory" / "ingest"
    folder.mkdir(parents=True)
    names: set[str] = set()
    allowed: dict[str, set[str]] = {}
    for i in range(MALFORMED):
        ext, data, outcomes = malformed(rng)
        name = odd_name(rng, i, ext)
        names.add(name)
        if outcomes is not None:
            allowed[name] = outcomes
        (folder / name).write_bytes(data)
    expected = set()
    for i in range(VALID):
        content = f"Valid fact number {i}: the {rng.choice(['red', 'blue', 'green'])} " \
                  f"{rng.choice(['fox', 'owl', 'eel'])} code is {rng.randint(1000, 9999)}"
        expected.add(content)
        name = f"valid-{i}.json"
        names.add(name)
        allowed[name] = {PROCESSED}
        (folder / name).write_text(json.dumps({"type": "Fact", "content": content}))
    for name in IGNORED:
        (folder / name).write_text("ignored while it has this name")

    _, result = publish(app, INGEST_SCAN, orch_id, "ingest", {"idempotencyKey": "fuzz-1"})
    first = result.get(timeout=240)
    assert first["remaining"] > 0 and first["followUp"]  # one scan takes 500 files
    scans = all_scans(app, first)
    assert all(s["ok"] and "error" not in s for s in scans)
    files = [f for s in scans for f in s["files"]]
    assert Counter(f["file"] for f in files) == Counter(names)  # each handled exactly once
    assert {f["outcome"] for f in files} <= {"ingested", "duplicate", "rejected"}
    ended = {f["file"]: PROCESSED if f["outcome"] != "rejected" else f["reason"]
             for f in files}
    wrong = {name: (ended[name], sorted(outcomes)) for name, outcomes in allowed.items()
             if ended[name] not in outcomes}
    assert wrong == {}
    assert len(allowed) > 0.9 * len(names)  # nearly every outcome was predicted
    log = read_log(settings.runtime_root(orch_id) / "memory/logs/memory.log")
    assert [r for r in log if r["event"] == "task_failed"] == []
    # Each scan applied once. The session worker's visibility timeout is 5 s: a scan
    # that runs longer on a loaded machine is delivered again, and its receipt answers.
    outcomes = [r["outcome"] for r in log if r["event"] == "task" and r["task"] == INGEST_SCAN]
    assert outcomes.count("ok") == len(scans) and set(outcomes) <= {"ok", "duplicate"}

    def settled() -> bool:
        return sorted(p.name for p in folder.iterdir() if p.is_file() or p.is_symlink()) == \
            sorted(IGNORED)

    wait_until(settled, timeout=240, interval=0.5, message="every file handled")
    processed = {p.name for p in (folder / "processed").iterdir()}
    rejected_dir = folder / "rejected"
    reasons = [json.loads(p.read_text()) for p in rejected_dir.glob("*.reason.json")]
    rejected = {p.name for p in rejected_dir.iterdir() if not p.name.endswith(".reason.json")}
    assert len(processed) + len(rejected) == len(names)
    assert {r["reason"] for r in reasons} <= set(REASONS)
    assert len(reasons) == len(rejected)
    assert {r["file"]: r["reason"] for r in reasons} == {
        name: reason for name, reason in ended.items() if reason != PROCESSED}
    stored = {n.content for n in list_memories(Databases(settings).open(orch_id), status=None,
                                               limit=100_000)}
    assert expected <= stored
    # The worker is alive and still writes.
    _, again = publish(app, WRITEBACK, orch_id, "wb", {"memories": [{
        "type": "Fact", "content": "after the fuzz", "source": {"sourceType": "manual",
                                                                 "capturedBy": "user"}}]})
    assert again.get(timeout=60)["ok"]
    assert os.path.exists(folder / IGNORED[0])
