"""Reflection in-process (``immediate=True``, the real task code and model, no broker):
topics, crystals, conflict insights, proposals and their review, working.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import free_port, make_settings, unique_id

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.reflection import stages
from orchmem.models.reflection.stages import META_CURSOR
from orchmem.models.storage.memories.events import set_meta
from orchmem.models.storage.reflection.insights import open_insights
from orchmem.models.telemetry import meters, names
from orchmem.worker import MemoryClient

PORT_OLD = "The billing service runs on port 8080"
PORT_NEW = "The billing service now runs on port 9090"
TEA = ["The user likes green tea in the morning", "The user drinks green tea every morning",
       "Green tea with honey is the user's favourite morning drink"]


def memory(content: str, memory_type: str = "Fact", *, by: str = "extractor",
           at: str | None = None, confidence: float = 0.8) -> dict[str, Any]:
    data: dict[str, Any] = {"type": memory_type, "content": content, "importance": 60,
                            "confidence": confidence,
                            "source": {"sourceType": "manual", "capturedBy": by}}
    if at:
        data["createdAt"] = at
    return data


def settings_for(tmp_path: Path, **memory_settings: Any) -> Settings:
    return make_settings(tmp_path / "root", f"redis://127.0.0.1:{free_port()}/0",
                         memory=memory_settings)


@pytest.fixture
def client(tmp_path: Path, embedder: Embedder) -> MemoryClient:
    return MemoryClient(unique_id("reflect"), settings_for(tmp_path), immediate=True)


def write(client: MemoryClient, *memories: dict[str, Any]) -> list[str]:
    result = client.write_back(memories=list(memories)).wait(60)
    assert result is not None and result["ok"], result
    return list(result["memoryIds"])


def reflect(client: MemoryClient) -> dict[str, Any]:
    result = client.reflect().wait(120)
    assert result is not None and result["ok"], result
    return result


def test_topics_and_one_crystal_per_topic_rebuilt_in_place(client: MemoryClient) -> None:
    tea = write(client, *(memory(t, "Preference", at=f"2026-01-0{i + 1}T00:00:00Z")
                          for i, t in enumerate(TEA)))
    first = reflect(client)
    assert first["crystalsBuilt"] == 1 and first["crystals"] == 1
    topics = {n.topic for n in client.get(tea)}
    assert len(topics) == 1 and next(iter(topics)).startswith("about:")
    assert client.get(tea)[0].dump()["topic"] in topics
    again = reflect(client)
    assert again["crystalsBuilt"] == 0 and again["proposals"] == 0

    odb = client.databases.open(client.orchestrator_id)
    assert odb is not None
    crystal_id = odb.sql("SELECT memory_id FROM crystals")[0][0]
    parts = odb.sql("SELECT from_memory_id FROM memory_edges WHERE to_memory_id = ? "
                    "AND edge_type = 'PartOf' ORDER BY from_memory_id", (crystal_id,))
    assert sorted(tea) == [p[0] for p in parts]
    write(client, memory("The user orders green tea at every morning meeting", "Preference"))
    rebuilt = reflect(client)
    assert rebuilt["crystalsBuilt"] == 1
    assert odb.sql("SELECT memory_id, units FROM crystals") == [(crystal_id, 4)]
    bundle = client.recall("what does the user drink in the morning?", top_n=10)
    assert crystal_id in bundle.memory_ids


def test_a_conflict_is_an_insight_the_bulletin_shows_until_it_is_resolved(
        client: MemoryClient) -> None:
    older, newer = write(client, memory("I live in Lisbon", "Identity",
                                        at="2026-01-01T00:00:00Z"),
                         memory("I live in Porto", "Identity", at="2026-02-01T00:00:00Z"))
    odb = client.databases.open(client.orchestrator_id)
    assert odb is not None
    with odb.read():
        found = open_insights(odb, 10)
    assert [(i["kind"], i["memoryIds"]) for i in found] == [("conflict", [newer, older])]
    assert "conflicting: I live in Porto" in client.bulletin().text
    assert client.supersede(older, by=newer, reason="moved").wait(30)["ok"]
    assert reflect(client)["conflictsDismissed"] == 1
    assert "conflicting" not in client.bulletin().text


def _port_proposal(client: MemoryClient) -> tuple[str, str, dict[str, Any]]:
    old, new = write(client, memory(PORT_OLD, at="2026-01-01T00:00:00Z"),
                     memory(PORT_NEW, at="2026-02-01T00:00:00Z"))
    assert reflect(client)["proposals"] == 1
    [proposal] = client.proposals()
    assert (proposal["relation"], proposal["newerId"], proposal["olderId"]) == \
        ("replaces", new, old)
    return old, new, proposal


def test_accepting_a_proposal_supersedes_the_older_memory_once(client: MemoryClient) -> None:
    old, new, proposal = _port_proposal(client)
    assert [n.status.value for n in client.get([old, new])] == ["active", "active"]
    before = client.working_memory()
    assert before is not None and proposal["olderId"] in before  # an open insight

    accepted = client.accept(proposal["proposalId"], reason="the port moved").wait(30)
    assert accepted is not None and accepted["ok"] and accepted["superseded"] == [old]
    assert [n.status.value for n in client.get([old, new])] == ["superseded", "active"]
    odb = client.databases.open(client.orchestrator_id)
    assert odb is not None
    assert odb.sql("SELECT edge_type FROM memory_edges WHERE from_memory_id = ? AND "
                   "to_memory_id = ?", (new, old)) == [("Updates",)]
    ops = [r[0] for r in odb.sql("SELECT op FROM memory_events ORDER BY id")]
    assert ops[-3:] == ["supersede", "link", "review_accept"]
    with odb.read():
        assert open_insights(odb, 10) == []
    assert reflect(client)["working"] is True  # the decision dirtied the projection
    assert "evolves pending" not in (client.working_memory() or "")

    twice = client.accept(proposal["proposalId"]).wait(30)
    assert twice is not None and twice["ok"] is False and twice["error"] == "validation"
    assert "already accepted" in twice["message"]
    late_reject = client.reject(proposal["proposalId"]).wait(30)
    assert late_reject is not None and "already accepted" in late_reject["message"]
    assert [n.status.value for n in client.get([old, new])] == ["superseded", "active"]


def test_bad_review_requests_change_nothing(client: MemoryClient, tmp_path: Path) -> None:
    old, new, proposal = _port_proposal(client)
    other = MemoryClient(unique_id("reflect-other"), client.settings, immediate=True)
    foreign = other.accept(proposal["proposalId"]).wait(30)
    assert foreign is not None and foreign["error"] == "scope_violation"
    unknown = client.accept(proposal["proposalId"][:-4] + "0000").wait(30)
    assert unknown is not None and unknown["error"] == "not_found"
    malformed = client.accept("p-nope")
    assert malformed.ok is False and malformed.error == "validation"

    assert client.forget(old, reason="wrong").wait(30)["ok"]
    gone = client.accept(proposal["proposalId"]).wait(30)
    assert gone is not None and gone["ok"] is False
    assert f"memory {old} is retracted since" in gone["message"]
    assert client.proposals()[0]["status"] == "pending"
    assert [n.status.value for n in client.get([new])] == ["active"]


def test_a_rejected_proposal_never_comes_back(client: MemoryClient) -> None:
    _, _, proposal = _port_proposal(client)
    rejected = client.reject(proposal["proposalId"], reason="two services").wait(30)
    assert rejected is not None and rejected["status"] == "rejected"
    odb = client.databases.open(client.orchestrator_id)
    assert odb is not None
    with odb.write():
        set_meta(META_CURSOR, "0")  # look at every memory again
    assert reflect(client)["proposals"] == 0
    assert [p["status"] for p in client.proposals(status=None)] == ["rejected"]


def test_auto_mode_applies_a_proposal_over_its_threshold(tmp_path: Path,
                                                         embedder: Embedder) -> None:
    settings = settings_for(tmp_path, evolves={"mode": "auto", "auto_threshold": 0.75})
    client = MemoryClient(unique_id("reflect-auto"), settings, immediate=True)
    old, new = write(client, memory(PORT_OLD, at="2026-01-01T00:00:00Z"),
                     memory(PORT_NEW, at="2026-02-01T00:00:00Z"))
    result = reflect(client)
    assert result["autoApplied"] == 1
    assert [n.status.value for n in client.get([old, new])] == ["superseded", "active"]
    assert client.proposals(status="accepted")[0]["decidedBy"] == "system"


def test_working_md_is_rebuilt_when_deleted_and_joins_the_context(
        client: MemoryClient) -> None:
    write(client, memory("Ship the billing migration by Friday", "Goal", by="user"),
          memory("Write the billing runbook", "Todo", by="user"))
    reflect(client)
    path = client.databases.workspace(client.orchestrator_id).bulletins_dir / "working.md"
    text = path.read_text()
    assert text.startswith(f"# Working memory of {client.orchestrator_id}\n")
    for heading in ("## Active goals", "## Open todos", "## Recent decisions",
                    "## Preferences", "## Open insights"):
        assert heading in text
    goal_line = next(line for line in text.splitlines() if "billing migration" in line)
    assert goal_line.endswith("]") and "[m-" in goal_line
    assert reflect(client)["working"] is False  # nothing changed: not rewritten
    path.unlink()
    assert reflect(client)["working"] is True and path.read_text().splitlines()[3:] == \
        text.splitlines()[3:]
    context = client.context_for("step", "what is the deadline?", working=True)
    assert context.text.startswith("[working memory]\n# Working memory of")
    assert "Ship the billing migration" in context.text
    assert len(context.text) <= client.memory.context.max_chars
    log = [json.loads(line) for line in client.databases.workspace(
        client.orchestrator_id).log_path.read_text().splitlines()]
    assert any(e["event"] == "reflect" and "topics" in e for e in log)


def test_a_hard_forget_of_a_unit_erases_the_crystal_that_quoted_it(
        client: MemoryClient) -> None:
    tea = write(client, *(memory(t, "Preference", at=f"2026-01-0{i + 1}T00:00:00Z")
                          for i, t in enumerate(TEA)))
    reflect(client)
    odb = client.databases.open(client.orchestrator_id)
    assert odb is not None
    [(crystal_id,)] = odb.sql("SELECT memory_id FROM crystals")
    assert client.forget(tea[1], hard=True, reason="wrong").wait(30)["ok"]
    assert odb.sql("SELECT forgotten, content FROM memories WHERE memory_id = ?",
                   (crystal_id,)) == [(1, "")]
    assert odb.sql("SELECT count(*) FROM memories WHERE content LIKE '%every morning%'") == \
        [(0,)]
    assert odb.sql("SELECT count(*) FROM crystals") == [(0,)]
    assert reflect(client)["crystals"] == 0  # two units left: below crystal_min_units


def test_a_write_never_reinforces_a_crystal(client: MemoryClient) -> None:
    write(client, *(memory(t, "Preference", at=f"2026-01-0{i + 1}T00:00:00Z")
                    for i, t in enumerate(TEA)))
    reflect(client)
    odb = client.databases.open(client.orchestrator_id)
    assert odb is not None
    [(crystal_id, content)] = odb.sql("SELECT c.memory_id, m.content FROM crystals c "
                                      "JOIN memories m ON m.memory_id = c.memory_id")
    result = client.write_back(memories=[memory(content, "Preference")]).wait(60)
    assert result is not None and result["created"] and result["reinforced"] == []
    assert odb.sql("SELECT reinforcements FROM memories WHERE memory_id = ?",
                   (crystal_id,)) == [(0,)]


def test_working_md_shows_a_crystal_instead_of_its_units(client: MemoryClient) -> None:
    tea = write(client, *(memory(t, "Preference", at=f"2026-01-0{i + 1}T00:00:00Z")
                          for i, t in enumerate(TEA)))
    reflect(client)
    preferences = (client.working_memory() or "").split("## Preferences\n")[1].split("##")[0]
    assert len(preferences.splitlines()) == 1 and preferences.startswith("- green tea: ")
    assert not any(unit in preferences for unit in tea)


def test_the_bulletin_shows_a_crystal_instead_of_its_units(client: MemoryClient) -> None:
    tea = write(client, *(memory(t, "Preference", at=f"2026-01-0{i + 1}T00:00:00Z")
                          for i, t in enumerate(TEA)))
    assert all(unit in client.bulletin().text for unit in tea)
    reflect(client)
    text = client.bulletin().text
    assert "green tea: " in text and not any(unit in text for unit in tea)


def test_an_export_leaves_crystals_out_and_the_import_compiles_them_again(
        client: MemoryClient, tmp_path: Path, embedder: Embedder) -> None:
    from orchmem.models.portability.export import export_jsonl
    from orchmem.models.portability.importer import import_folder

    tea = write(client, *(memory(t, "Preference", at=f"2026-01-0{i + 1}T00:00:00Z")
                          for i, t in enumerate(TEA)))
    reflect(client)
    odb = client.databases.open(client.orchestrator_id)
    assert odb is not None
    manifest = export_jsonl(odb, tmp_path / "export")
    assert manifest["crystals_left_out"] == 1 and manifest["counts"]["records"] == len(tea)
    assert "PartOf" not in (tmp_path / "export" / "edges.jsonl").read_text()
    elsewhere = make_settings(tmp_path / "elsewhere", client.settings.broker_url)
    other = MemoryClient(client.orchestrator_id, elsewhere, immediate=True)
    target = other.databases.open(other.orchestrator_id)
    assert target is not None
    import_folder(target, tmp_path / "export", embedder=embedder, batch_size=64)
    assert reflect(other)["crystalsBuilt"] == 1
    assert target.sql("SELECT count(*) FROM crystals") == [(1,)]


def test_working_md_holds_only_what_a_request_naming_nothing_may_see(
        client: MemoryClient) -> None:
    """Restricted memories, another session's and a conflict about a restricted one
    never reach working.md (it is read without a session, like the default bulletin)."""
    secret = memory("I live in the safehouse on Rua Augusta", "Identity",
                    at="2026-01-01T00:00:00Z") | {"sensitivity": "restricted"}
    public = memory("I live in Porto", "Identity", at="2026-02-01T00:00:00Z")
    session_goal = memory("Finish the Vigo negotiation draft", "Goal") | {
        "scope": "session", "sessionId": "call-7"}
    global_goal = memory("Ship the billing export by Friday", "Goal")
    ids = write(client, secret, public, session_goal, global_goal)
    assert client.link(ids[1], ids[0], "Contradicts", reason="two homes").wait(30)["ok"]
    odb = client.databases.open(client.orchestrator_id)
    assert odb is not None
    with odb.read():  # a conflict insight naming the restricted memory
        assert any(set(i["memoryIds"]) == {ids[0], ids[1]} for i in open_insights(odb, 10))
    reflect(client)
    text = client.working_memory() or ""
    assert "Ship the billing export" in text and ids[3] in text
    for hidden in ("safehouse", "Rua Augusta", "Vigo", ids[0], ids[2]):
        assert hidden not in text, hidden


class Counted:
    """A metrics sink (models/telemetry/meters.py) that keeps the outcomes it is given."""

    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def record(self, name: str, kind: str, value: float, attributes: dict[str, str]) -> None:
        if name == names.M_REFLECTIONS:
            self.outcomes.append(attributes[names.OUTCOME])


def test_each_reflection_run_is_counted_by_its_outcome(client: MemoryClient,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    write(client, memory("The deploy runs on Fridays"), memory("Deploys need two reviewers"))

    def fails(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("summariser down")

    counted = Counted()
    meters.install_sink(counted)
    try:
        reflect(client)
        monkeypatch.setattr(stages, "crystallize", fails)
        failed = client.reflect().wait(120)
    finally:
        meters.install_sink(None)
    assert failed is None or not failed["ok"]
    assert counted.outcomes == ["ok", "RuntimeError"]
