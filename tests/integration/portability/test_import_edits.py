"""An edited export imported back: an edit is applied as an audited patch or supersede
with --apply-edits, or the import refuses naming each changed record and how to apply
it; never "ok" with the edit dropped."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from orchmem_testing import make_settings

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.history import history
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.worker import MemoryClient
from orchmem.worker.cli.main import main

ORCH = "editor"


def _cli(settings: Settings, *args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(main, ["--root", str(settings.root), *args, "--json"])
    text = result.output
    start = text.find("{")
    return result.exit_code, json.loads(text[start:]) if start >= 0 else text


def _lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]


def _rewrite(folder: Path, lines: list[dict[str, Any]], rehash: bool = False) -> None:
    path = folder / "records.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n"
                            for line in lines))
    if rehash:
        manifest = folder / "manifest.toml"
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        manifest.write_text(re.sub(r'("records\.jsonl" = ")[0-9a-f]+(")', rf"\g<1>{digest}\2",
                                   manifest.read_text()))


def _events(settings: Settings, memory_id: str) -> list[dict[str, Any]]:
    odb = Databases(settings, readonly=True).open(ORCH, create=False)
    assert odb is not None
    return list(history(odb, memory_id, EVERYTHING, purpose="test oracle")["events"])


def test_an_edited_export_is_applied_as_audited_edits_or_refused(
        tmp_path: Path, embedder: Embedder) -> None:
    settings = make_settings(tmp_path / "root", "")
    client = MemoryClient(ORCH, settings, immediate=True)
    [kept, renamed] = [client.write_back(memories=[{"type": "Fact", "content": text}]).wait(30)
                       ["memoryIds"][0] for text in ("The boiler is serviced in October",
                                                      "The shop closes at six")]
    out = tmp_path / "out"
    assert _cli(settings, "export", "--orch", ORCH, "--out", str(out))[0] == 0
    lines = _lines(out)
    by_id = {line["memoryId"]: line for line in lines}
    by_id[kept]["importance"] = 91
    by_id[kept]["tags"] = ["house"]
    by_id[renamed]["content"] = "The shop closes at seven"
    _rewrite(out, lines)

    code, refused = _cli(settings, "import", "--orch", ORCH, str(out))
    assert code != 0 and refused["reason"] == "hash_mismatch", refused
    assert "--apply-edits" in refused["message"]
    _rewrite(out, lines, rehash=True)  # hashes made to match: still not dropped
    code, refused = _cli(settings, "import", "--orch", ORCH, str(out))
    assert code != 0 and refused["reason"] == "conflict", refused
    paths = {e["path"]: e["message"] for e in refused["errors"]}
    number = lines.index(by_id[kept]) + 1
    assert set(paths) >= {f"records.jsonl:{number}:importance", f"records.jsonl:{number}:tags",
                          f"records.jsonl:{lines.index(by_id[renamed]) + 1}:content"}
    assert all("--apply-edits" in m for m in paths.values()), paths
    assert client.get([kept])[0].importance != 91  # nothing was imported

    code, report = _cli(settings, "import", "--orch", ORCH, str(out), "--apply-edits")
    assert code == 0, report
    edits = {e["memoryId"]: e for e in report["edits"]}
    assert edits[kept]["patched"] == ["importance", "tags"]
    new_id = edits[renamed]["supersededBy"]
    [patched] = client.get([kept])
    assert patched.importance == 91 and patched.tags == ["house"]
    patch = _events(settings, kept)[-1]
    assert patch["op"] == "patch" and patch["after"]["importance"] == 91
    assert "records.jsonl" in patch["reason"]
    [old, new] = client.get([renamed, new_id], view=EVERYTHING, purpose="test oracle")
    assert old.status.value == "superseded" and new.content == "The shop closes at seven"

    # the same file again: applied once, nothing more
    code, again = _cli(settings, "import", "--orch", ORCH, str(out), "--apply-edits")
    assert code == 0 and again["edits"] == [] and again["written"]["records"] == 0, again
    assert [e["op"] for e in _events(settings, kept)].count("patch") == 1


def test_a_field_an_import_cannot_apply_is_refused_naming_the_command(
        tmp_path: Path, embedder: Embedder) -> None:
    settings = make_settings(tmp_path / "root", "")
    client = MemoryClient(ORCH, settings, immediate=True)
    memory_id = client.write_back(memories=[{"type": "Fact", "content": "The cat is Miso"}]
                                  ).wait(30)["memoryIds"][0]
    out = tmp_path / "out"
    assert _cli(settings, "export", "--orch", ORCH, "--out", str(out))[0] == 0
    lines = _lines(out)
    lines[0]["status"] = "retracted"
    _rewrite(out, lines)
    code, refused = _cli(settings, "import", "--orch", ORCH, str(out), "--apply-edits")
    assert code != 0 and refused["reason"] == "edited", refused
    [error] = refused["errors"]
    assert error["path"] == "records.jsonl:1:status" and "orchmem forget" in error["message"]
    assert client.get([memory_id])[0].status.value == "active"
