"""1,000+ generated malformed files through a real worker's scan: every one ends in
processed/ or rejected/ with a reason, the worker survives, valid files' memories are all there."""

from __future__ import annotations

import json
import os
import random

import pytest
from orchmem_testing import wait_until

from orchmem.config import Settings
from orchmem.models.database import Databases
from orchmem.models.ingest import REASONS
from orchmem.models.store import list_memories
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.app import OrchmemCelery
from orchmem.worker.publish import publish

pytestmark = pytest.mark.usefixtures("worker")
MALFORMED = 1000
VALID = 60
IGNORED = [".hidden.md", "upload.json.part", "draft.md.tmp", "notes.md~"]


def odd_name(rng: random.Random, i: int, ext: str) -> str:
    stems = [f"f{i}", f"with space {i}", f"ünïcødé-{i}", f"emoji-🧠-{i}", f"-dash{i}",
             f"quote'\"$;{i}", f"new\nline{i}", "x" * rng.randint(50, 200) + str(i),
             f"UPPER{i}", f"dots.in.name.{i}"]
    return rng.choice(stems) + ext


def malformed(rng: random.Random) -> tuple[str, bytes]:
    kind = rng.randrange(12)
    ext = rng.choice([".json", ".md", ".txt", ".json", ".bin", ".JSON", ""])
    record = {"type": "Fact", "content": "a fact", "importance": 50}
    if kind == 0:
        return ext, rng.randbytes(rng.randint(0, 2000))
    if kind == 1:
        text = json.dumps([record] * rng.randint(1, 5))
        return ".json", text[: rng.randint(0, len(text) - 1)].encode()
    if kind == 2:
        bad = dict(record)
        bad[rng.choice(["type", "content", "importance", "confidence"])] = rng.choice(
            [7, None, [], {}, "x" * 3, -1, 1e309, True])
        return ".json", json.dumps([bad]).encode()
    if kind == 3:
        return ".json", json.dumps({**record, "content": "y" * 20_000}).encode()
    if kind == 4:
        depth = rng.randint(65, 5000)
        return ".json", (b"[" * depth + b"]" * depth)
    if kind == 5:
        return rng.choice([".txt", ".md"]), b"text with a NUL\x00 byte in it"
    if kind == 6:
        return ".json", json.dumps({**record, "surprise": "field"}).encode()
    if kind == 7:
        return rng.choice([".json", ".md", ".txt"]), rng.choice([b"", b"   \n", b"\t\t"])
    if kind == 8:
        return ".json", rng.choice([b"null", b"42", b'"string"', b"true", b"[1, 2]"])
    if kind == 9:
        return ".txt", "I prefer tea".encode("utf-16")
    if kind == 10:
        return ".md", b"# Title\n## Subtitle\n### Another\n"
    return ".json", json.dumps({**record, "source": {"sourcePath": "/etc/passwd"}}).encode()


def test_a_thousand_malformed_files_each_end_processed_or_rejected(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    rng = random.Random(1234)
    folder = settings.runtime_root(orch_id) / "memory" / "ingest"
    folder.mkdir(parents=True)
    names: set[str] = set()
    for i in range(MALFORMED):
        ext, data = malformed(rng)
        name = odd_name(rng, i, ext)
        names.add(name)
        (folder / name).write_bytes(data)
    expected = set()
    for i in range(VALID):
        content = f"Valid fact number {i}: the {rng.choice(['red', 'blue', 'green'])} " \
                  f"{rng.choice(['fox', 'owl', 'eel'])} code is {rng.randint(1000, 9999)}"
        expected.add(content)
        name = f"valid-{i}.json"
        names.add(name)
        (folder / name).write_text(json.dumps({"type": "Fact", "content": content}))
    for name in IGNORED:
        (folder / name).write_text("ignored while it has this name")

    _, result = publish(app, INGEST_SCAN, orch_id, "ingest", {"idempotencyKey": "fuzz-1"})
    first = result.get(timeout=240)
    assert first["remaining"] > 0 and first["followUp"]  # one scan takes 500 files

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
    stored = {n.content for n in list_memories(Databases(settings).open(orch_id), status=None,
                                               limit=100_000)}
    assert expected <= stored
    # The worker is alive and still writes.
    _, again = publish(app, WRITEBACK, orch_id, "wb", {"memories": [{
        "type": "Fact", "content": "after the fuzz", "source": {"sourceType": "manual",
                                                                 "capturedBy": "user"}}]})
    assert again.get(timeout=60)["ok"]
    assert os.path.exists(folder / IGNORED[0])
