"""Governance through the in-process client: the fields of every memory,
scope views, restricted reads, patch and invalidate, and forget by policy."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import free_port, make_settings, unique_id

from orchmem.config import MemoryValidationError, Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.history import history
from orchmem.models.recall.context_budget import count_tokens
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.models.workspace.memlog import read_log
from orchmem.worker import MemoryClient

#: What a test's oracle reads: every memory, restricted ones with a purpose.
EVERY: dict[str, Any] = {"view": EVERYTHING, "purpose": "test oracle"}

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


@pytest.fixture
def client(tmp_path: Path, embedder: Embedder) -> MemoryClient:
    settings = make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0")
    return MemoryClient(unique_id("gov"), settings, immediate=True)


def write(client: MemoryClient, content: str, memory_type: str = "Fact",
          **fields: Any) -> str:
    handle = client.write_back(memories=[{"type": memory_type, "content": content,
                                          "source": MANUAL, **fields}])
    assert handle.ok, handle.errors
    result = handle.wait()
    assert result is not None and result["ok"], result
    return str(result["memoryIds"][0])


def node(client: MemoryClient, memory_id: str) -> dict[str, Any]:
    return client.get([memory_id], **EVERY)[0].dump()


def test_every_memory_carries_tier_scope_sensitivity_tags_and_metadata(
        client: MemoryClient) -> None:
    tea = write(client, "The user prefers green tea", "Preference")
    met = write(client, "Met the auditors on Monday", "Event")
    rule = write(client, "Always answer in French", "Preference", tier="procedural",
                 scope="project", projectId="p1", sensitivity="confidential",
                 tags=["lang", "style"], metadata={"origin": "onboarding", "rank": 2})
    assert {k: node(client, tea)[k] for k in ("tier", "scope", "sensitivity", "tags",
                                              "metadata")} == {
        "tier": "profile", "scope": "global", "sensitivity": "internal", "tags": [],
        "metadata": {}}
    assert node(client, met)["tier"] == "episodic"
    explicit = node(client, rule)
    assert (explicit["tier"], explicit["scope"], explicit["projectId"],
            explicit["sensitivity"], explicit["tags"], explicit["metadata"]) == (
        "procedural", "project", "p1", "confidential", ["lang", "style"],
        {"origin": "onboarding", "rank": 2})


def test_a_transcripts_conversation_is_its_session_and_global_is_the_default(
        client: MemoryClient) -> None:
    said = client.write_back(transcript={"conversationId": "conv-1", "messages": [
        {"role": "user", "text": "My name is Dana. I prefer window seats."}]}).wait()
    kept = client.write_back(transcript={"conversationId": "conv-2", "scope": "session",
                                         "messages": [{"role": "user",
                                                       "text": "I prefer aisle seats."}]}).wait()
    assert said and kept and said["memoryIds"] and kept["memoryIds"]
    first = node(client, said["memoryIds"][0])
    assert (first["scope"], first["sessionId"]) == ("global", "conv-1")
    second = node(client, kept["memoryIds"][0])
    assert (second["scope"], second["sessionId"]) == ("session", "conv-2")
    # global: every conversation recalls it; session: only its own
    assert said["memoryIds"][0] in client.recall("what is my name?", session_id="conv-9").memory_ids
    assert kept["memoryIds"][0] not in client.recall("which seats?", session_id="conv-9").memory_ids
    assert kept["memoryIds"][0] in client.recall("which seats?", session_id="conv-2").memory_ids


def test_a_session_sees_global_and_its_own_never_another_sessions(
        client: MemoryClient) -> None:
    shared = write(client, "The office wifi network is called Harbor")
    mine = write(client, "The wifi password reset was asked for by Alma",
                 scope="session", sessionId="s-a")
    theirs = write(client, "The wifi router was moved by Bruno", scope="session",
                   sessionId="s-b")
    project = write(client, "The wifi upgrade is part of project Lighthouse",
                    scope="project", projectId="lighthouse")
    seen = {who: set(client.recall("wifi", session_id=who).memory_ids)
            for who in ("s-a", "s-b")}
    assert seen["s-a"] == {shared, mine} and seen["s-b"] == {shared, theirs}
    assert set(client.recall("wifi").memory_ids) == {shared}
    assert set(client.recall("wifi", session_id="s-a", project_id="lighthouse")
               .memory_ids) == {shared, mine, project}
    bulletin = client.bulletin(session_id="s-a")
    assert mine in bulletin.text and theirs not in bulletin.text and project not in bulletin.text
    assert theirs not in client.context_for("selector", "wifi", session_id="s-a").text


def test_the_same_words_in_two_sessions_are_two_memories(client: MemoryClient) -> None:
    a = write(client, "The build runs on Fridays", scope="session", sessionId="s-a")
    b = write(client, "The build runs on Fridays", scope="session", sessionId="s-b")
    g = write(client, "The build runs on Fridays")
    assert len({a, b, g}) == 3
    assert write(client, "The build runs on Fridays", scope="session", sessionId="s-a") == a


def test_restricted_memories_only_come_back_with_a_purpose_and_are_audited(
        client: MemoryClient) -> None:
    secret = write(client, "The staging api_key = Zx81kQ0pL2mN7vB4cD9e for the deploy bot")
    plain = write(client, "The staging deploy bot runs nightly")
    assert node(client, secret)["sensitivity"] == "restricted"
    assert node(client, plain)["sensitivity"] == "internal"
    assert secret not in client.recall("staging deploy bot").memory_ids
    assert secret not in client.bulletin().text
    assert secret not in client.context_for("step", "staging deploy bot").text
    with pytest.raises(MemoryValidationError, match="purpose"):
        client.recall("staging deploy bot", include_restricted=True)
    bundle = client.recall("staging deploy bot", include_restricted=True,
                           purpose="rotate the key")
    assert secret in bundle.memory_ids
    log = [r for r in read_log(client.databases.workspace(client.orchestrator_id).log_path)
           if r["event"] == "restricted_read" and r["purpose"] != "test oracle"]
    assert [(r["purpose"], r["memoryIds"]) for r in log] == [("rotate the key", [secret])]
    assert "Zx81kQ0pL2mN7vB4cD9e" not in json.dumps(log)


def test_tags_filter_recall(client: MemoryClient) -> None:
    red = write(client, "The release checklist lives in the wiki", tags=["release"])
    write(client, "The wiki is hosted on Confluence", tags=["tools"])
    assert client.recall("wiki", tags=["release"]).memory_ids == [red]
    tagged = client.bulletin(tags=["release"])
    assert red in tagged.text and tagged.source == "live"
    assert client.bulletin(tags=["nothing-tagged"]).text.count("m-") == 0


@pytest.mark.parametrize(("fields", "path"), [
    ({"tier": "working"}, "memories.0.tier"),
    ({"scope": "team"}, "memories.0.scope"),
    ({"sensitivity": "secret"}, "memories.0.sensitivity"),
    ({"scope": "session"}, "memories.0"),
    ({"scope": "project"}, "memories.0"),
    ({"metadata": {"blob": "x" * 3000}}, "memories.0.metadata"),
    ({"tags": [f"t{i}" for i in range(21)]}, "memories.0.tags"),
    ({"tags": ["has space"]}, "memories.0.tags"),
])
def test_bad_governance_fields_are_refused_naming_the_field(
        client: MemoryClient, fields: dict[str, Any], path: str) -> None:
    handle = client.write_back(memories=[{"type": "Fact", "content": "Anything at all",
                                          "source": MANUAL, **fields}])
    assert handle.ok is False and handle.error == "validation"
    assert handle.errors and handle.errors[0]["path"].startswith(path), handle.errors
    assert client.recall("anything").nodes == []


def test_patch_changes_fields_in_place_with_before_and_after_in_the_audit(
        client: MemoryClient) -> None:
    memory_id = write(client, "The quarterly report is due in March", importance=40)
    result = client.patch(memory_id, importance=80, tags=["finance"], scope="project",
                          project_id="q1", reason="finance asked").wait()
    assert result and result["ok"] and result["fields"] == ["importance", "project_id",
                                                             "scope", "tags"]
    after = node(client, memory_id)
    assert (after["importance"], after["tags"], after["scope"], after["projectId"]) == (
        80, ["finance"], "project", "q1")
    odb = client.databases.open(client.orchestrator_id)
    event = history(odb, memory_id, EVERYTHING)["events"][-1]
    assert event["op"] == "patch"
    assert event["before"] == {"importance": 40, "tags": "[]", "scope": "global",
                               "project_id": None}
    refused = client.patch(memory_id, content="new words")
    assert refused.ok is False and "supersede" in (refused.message or "")
    incomplete = client.patch(memory_id, scope="session").wait()
    assert incomplete and incomplete["ok"] is False and "sessionId" in incomplete["message"]
    assert node(client, memory_id)["scope"] == "project"


def test_invalidate_retracts_with_its_own_audited_op(client: MemoryClient) -> None:
    memory_id = write(client, "The office moved to Lisbon")
    assert client.invalidate(memory_id, "it never moved: a typo").wait()["ok"]
    assert node(client, memory_id)["status"] == "retracted"
    odb = client.databases.open(client.orchestrator_id)
    event = history(odb, memory_id, EVERYTHING)["events"][-1]
    assert (event["op"], event["after"]) == ("invalidate", {"status": "retracted",
                                                            "invalidated": True})
    assert memory_id not in client.recall("office Lisbon").memory_ids


def _forget_cases(client: MemoryClient) -> dict[str, tuple[dict[str, Any], set[str]]]:
    old = write(client, "The kickoff happened in the old office", "Event",
                createdAt="2020-01-01T00:00:00Z")
    session = write(client, "Prefers the blue theme", "Preference", scope="session",
                    sessionId="s-1")
    project = write(client, "Uses Terraform for the infra", scope="project", projectId="p-1")
    tagged = write(client, "Lunch is at noon", tags=["trivia"])
    named = write(client, "The printer is on floor two")
    conversation = client.write_back(transcript={"conversationId": "c-1", "messages": [
        {"role": "user", "text": "My name is Imre."}]}).wait()["memoryIds"][0]
    run = client.write_back(workflow_output={"workflowRunId": "r-1", "stepId": "plan",
                                             "output": {"decisions": ["Ship on Monday"]}}
                            ).wait()["memoryIds"][0]
    return {"ids": ({"memory_ids": [named]}, {named}),
            "before": ({"before": "2021-01-01"}, {old}),
            "session": ({"session_id": "s-1"}, {session}),
            "project": ({"project_id": "p-1"}, {project}),
            "conversation": ({"conversation_id": "c-1"}, {conversation}),
            "run": ({"workflow_run_id": "r-1"}, {run}),
            "tag": ({"tags": ["trivia"]}, {tagged})}


@pytest.mark.parametrize("hard", [False, True])
def test_forget_by_every_selector_dry_run_first(client: MemoryClient, hard: bool) -> None:
    for name, (selector, expected) in _forget_cases(client).items():
        dry = client.forget_where(**selector, hard=hard, dry_run=True).wait()
        assert dry and dry["ok"] and set(dry["memoryIds"]) == expected, name
        assert all(node(client, m)["status"] == "active" for m in expected)
        done = client.forget_where(**selector, hard=hard).wait()
        assert done and (done["count"], done["memoryIds"]) == (dry["count"], dry["memoryIds"])
        assert client.get(sorted(expected), **EVERY) == [] if hard else \
            all(node(client, m)["status"] == "retracted" for m in expected)
        again = client.forget_where(**selector, hard=hard).wait()
        assert again and (again["count"], again["memoryIds"]) == (0, [])


def test_a_hard_forget_by_policy_leaves_no_byte(client: MemoryClient) -> None:
    words = "Quokka-Marmalade-7731 is the name of the vault"
    memory_id = write(client, words, scope="session", sessionId="s-z", tags=["zebra-tag"],
                      metadata={"note": "periwinkle-ostrich"})
    assert client.forget_where(session_id="s-z", hard=True).wait()["count"] == 1
    path = client.databases.workspace(client.orchestrator_id).db_path
    client.databases.close_all()
    for file in path.parent.glob("memory.db*"):
        data = file.read_bytes()
        for needle in (b"Quokka", b"Marmalade", b"zebra-tag", b"periwinkle"):
            assert needle not in data, (file.name, needle)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT forgotten, tags, metadata FROM memories WHERE memory_id = ?",
                            (memory_id,)).fetchone() == (1, "[]", "{}")
    conn.close()


@pytest.mark.parametrize(("selector", "path"), [
    ({"before": "last tuesday"}, "forget_policy.before"),
    ({}, "forget_policy"),
    ({"memory_ids": ["m-00000000-0000000000000000"]}, None),
])
def test_bad_forget_selectors_are_refused(client: MemoryClient, selector: dict[str, Any],
                                          path: str | None) -> None:
    kept = write(client, "A memory that must stay")
    handle = client.forget_where(**selector, hard=True)
    if path is None:  # another orchestrator's id
        result = handle.wait()
        assert result and result["ok"] is False and result["error"] == "scope_violation"
    else:
        assert handle.ok is False and handle.errors and handle.errors[0]["path"] == path
    assert node(client, kept)["status"] == "active"


def test_context_relevant_memory_format_and_budgets(client: MemoryClient) -> None:
    for n in range(6):
        write(client, f"Project Falcon milestone {n} is planned for week {n + 10}")
    context = client.context_for("step", "project falcon milestones",
                                 format="relevant-memory")
    lines = context.text.split("\n")
    assert lines[0] == "[Relevant Memory]" and len(lines) == 7
    assert all(line.startswith("- Project Falcon milestone") for line in lines[1:])
    # (ties in rank may come back in another order: compare lines as sets)
    short = client.context_for("step", "project falcon milestones", format="relevant-memory",
                               max_chars=len("\n".join(lines[:3]))).text.split("\n")
    assert len(short) == 3 and short[0] == lines[0] and set(short) <= set(lines)
    few = client.context_for("step", "project falcon milestones", format="relevant-memory",
                             max_tokens=4 + 2 * 10).text.split("\n")
    assert len(few) == 3 and set(few) <= set(lines)  # header 4 tokens, lines 10
    full = client.context_for("selector", "project falcon").text
    block = client.context_for("selector", "project falcon", max_tokens=40).text
    assert count_tokens(full) > 40 >= count_tokens(block) > 0
    lines = block.split("\n")  # whole lines (equal ranks may come back in another order)
    assert lines[0] == full.split("\n")[0] and set(lines) <= set(full.split("\n"))


def test_old_settings_default_governance(tmp_path: Path) -> None:
    settings: Settings = make_settings(tmp_path, "")
    governance = settings.memory.governance
    assert governance.secret_detector and "payment_card" in governance.secret_rules
    assert [(r.tier, r.scope, r.type, r.days) for r in governance.retention][:1] == [
        ("profile", None, None, 0)]


def test_exports_leave_restricted_out_mark_confidential_and_old_files_import_as_defaults(
        client: MemoryClient, tmp_path: Path, embedder: Embedder) -> None:
    from orchmem.models.portability.export import FILES, export_jsonl, export_markdown
    from orchmem.models.portability.importer import import_folder
    from orchmem.models.storage.db.database import Databases

    write(client, "The client list is confidential", sensitivity="confidential")
    write(client, "My password is Walrus-2231")
    write(client, "The user prefers tea", "Preference")
    odb = client.databases.open(client.orchestrator_id)
    manifest = export_jsonl(odb, tmp_path / "out")
    assert manifest["restricted_left_out"] == 1
    lines = [json.loads(x) for x in (tmp_path / "out" / FILES["records"]).read_text()
             .splitlines()]
    assert sorted(r["sensitivity"] for r in lines) == ["confidential", "internal"]
    assert "**CONFIDENTIAL** The client list" in export_markdown(
        odb, tmp_path / "md").read_text()
    # an export written before schema 3: no governance fields in its records
    old_fields = ("tier", "scope", "sessionId", "projectId", "sensitivity", "tags", "metadata")
    records = tmp_path / "out" / FILES["records"]
    records.write_text("".join(json.dumps({k: v for k, v in r.items() if k not in old_fields},
                                          sort_keys=True, separators=(",", ":")) + "\n"
                               for r in lines))
    _rehash(tmp_path / "out")
    target = Databases(make_settings(tmp_path / "other", "")).open(client.orchestrator_id)
    import_folder(target, tmp_path / "out", embedder=embedder, batch_size=16)
    with sqlite3.connect(target.workspace.db_path) as conn:
        rows = sorted(conn.execute("SELECT type, tier, scope, sensitivity, tags, metadata "
                                   "FROM memories").fetchall())
    conn.close()
    assert rows == [("Fact", "semantic", "global", "internal", "[]", "{}"),
                    ("Preference", "profile", "global", "internal", "[]", "{}")]


def _rehash(folder: Path) -> None:
    """Rewrite the manifest's sha256 and line count of records.jsonl after an edit."""
    import hashlib
    import re

    manifest = folder / "manifest.toml"
    data = (folder / "records.jsonl").read_bytes()
    text = manifest.read_text()
    digest = hashlib.sha256(data).hexdigest()
    text = re.sub(r'("records.jsonl" = ")[0-9a-f]+', rf"\g<1>{digest}", text)
    manifest.write_text(text)


def test_the_mcp_recall_tool_takes_a_session(client: MemoryClient) -> None:
    from orchmem.worker.mcp.server import MemoryTools

    mine = write(client, "The ferry ticket of Alma is in her inbox", scope="session",
                 sessionId="s-a")
    tools = MemoryTools(client, 30)
    found = {m["memoryId"] for m in tools.recall("ferry ticket", session_id="s-a")["memories"]}
    assert mine in found
    assert tools.recall("ferry ticket", session_id="s-b")["memories"] == []


def test_reflection_never_takes_a_scoped_or_sensitive_memory_as_a_unit(
        client: MemoryClient) -> None:
    from orchmem.models.storage.reflection.units import units

    plain = write(client, "The office plants are watered on Mondays")
    kept_out = [write(client, "The session plants note", scope="session", sessionId="s-1"),
                write(client, "The project plants note", scope="project", projectId="p-1"),
                write(client, "The confidential plants note", sensitivity="confidential"),
                write(client, "The plants shed password is Fern-9921")]
    found = {u.memory_id for u in units(client.databases.open(client.orchestrator_id))}
    assert plain in found and not found & set(kept_out)
