"""Time on memories: validFrom / validTo, dated phrases, supersede closing a window,
recall as of a time and the latest state of a subject (real SQLite, real MiniLM)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings

from orchmem.config import MemoryValidationError
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.edits import Forget, Supersede, apply_edit
from orchmem.models.governance.history import history
from orchmem.models.portability.export import export_jsonl
from orchmem.models.portability.importer import import_folder
from orchmem.models.recall.router import plan
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.models.writeback.apply import write_memories

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
ORCH = "timely"
NOW = datetime.now(UTC)


@pytest.fixture
def databases(tmp_path: Path) -> Databases:
    return Databases(make_settings(tmp_path, ""))


def ts(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).isoformat()


def write(odb: OrchestratorDB, embedder: Embedder, key: str, **item: Any) -> str:
    memory = validate(MemoryInput, {"type": "Fact", "source": MANUAL, **item},
                      workspace=odb.workspace)
    result = write_memories(odb, key=key, task="t", memories=[memory],
                            vectors=list(embedder.encode([memory.content])),
                            embedder=embedder.version)
    return str(result["memoryIds"][0])


def node(odb: OrchestratorDB, memory_id: str) -> dict[str, Any]:
    return dict(history(odb, memory_id, EVERYTHING)["memory"])


def test_valid_from_and_to_are_stored_and_dated_phrases_resolved_against_valid_from(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    memory_id = write(odb, embedder, "k1", content="I went to the support group yesterday",
                      validFrom="2023-05-08T13:56:00Z", validTo="2023-06-01T00:00:00+00:00")
    got = node(odb, memory_id)
    assert got["validFrom"] == "2023-05-08T13:56:00.000000Z"
    assert got["validTo"] == "2023-06-01T00:00:00.000000Z"
    assert got["timeRefs"] == [{"text": "yesterday", "from": "2023-05-07", "to": "2023-05-07"}]
    plain = node(odb, write(odb, embedder, "k2", content="The office is in Porto"))
    assert "validFrom" not in plain and "validTo" not in plain and "timeRefs" not in plain


@pytest.mark.parametrize(("item", "field"), [
    ({"validFrom": "2023-05-08T00:00:00Z", "validTo": "2023-05-01T00:00:00Z"}, "validTo"),
    ({"createdAt": "2023-05-08T00:00:00Z", "validTo": "2023-05-01T00:00:00Z"}, "validTo"),
    ({"validFrom": "8 May 2023"}, "validFrom"),
    ({"validFrom": "2023-05-08T00:00:00"}, "validFrom"),  # no time zone
    ({"validTo": 20230508}, "validTo"),
])
def test_bad_times_are_refused_naming_the_field(databases: Databases, item: dict[str, Any],
                                                field: str) -> None:
    odb = databases.open(ORCH)
    with pytest.raises(MemoryValidationError, match=field):
        validate(MemoryInput, {"type": "Fact", "content": "x", "source": MANUAL, **item},
                 workspace=odb.workspace)


def test_a_supersede_closes_the_older_window_at_the_newer_start(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    old = write(odb, embedder, "k1", content="The team uses Postgres", validFrom=ts(30))
    new = write(odb, embedder, "k2", content="The team moved to SQLite", validFrom=ts(10))
    apply_edit(odb, Supersede(op="supersede", memory_id=old, by=new, reason="moved"),
               key="e1", task="edit")
    assert node(odb, old)["validTo"] == node(odb, new)["validFrom"]
    assert "validTo" not in node(odb, new)
    [event] = [e for e in history(odb, old, EVERYTHING)["events"] if e["op"] == "supersede"]
    assert event["after"]["validTo"] == node(odb, new)["validFrom"]


def test_a_given_valid_to_is_kept_by_a_supersede(databases: Databases,
                                                 embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    old = write(odb, embedder, "k1", content="The sale runs", validFrom=ts(30),
                validTo=ts(20))
    new = write(odb, embedder, "k2", content="The sale is over", validFrom=ts(5))
    apply_edit(odb, Supersede(op="supersede", memory_id=old, by=new), key="e1", task="edit")
    assert node(odb, old)["validTo"].startswith(ts(20)[:10])


def seed_move(odb: OrchestratorDB, embedder: Embedder) -> tuple[str, str]:
    """The office was in Porto (stated 60 days ago), moved to Lisbon 20 days ago."""
    porto = write(odb, embedder, "k1", content="The office is in Porto",
                  createdAt=ts(60), validFrom=ts(60))
    lisbon = write(odb, embedder, "k2", content="The office is in Lisbon now",
                   createdAt=ts(20), validFrom=ts(20))
    # The extractor's rules may already see the same subject restated (a supersede);
    # otherwise it is done by hand. Either way the window of Porto closes.
    if node(odb, porto)["status"] == "active":
        apply_edit(odb, Supersede(op="supersede", memory_id=porto, by=lisbon), key="e1",
                   task="edit")
    assert node(odb, porto)["validTo"] == node(odb, lisbon)["validFrom"]
    return porto, lisbon


def test_recall_as_of_returns_what_was_valid_and_known_then(databases: Databases,
                                                           embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    porto, lisbon = seed_move(odb, embedder)
    query = "Where is the office?"
    assert recall(ORCH, query, databases=databases).memory_ids == [lisbon]
    then = recall(ORCH, query, databases=databases, as_of=ts(40))
    assert then.memory_ids == [porto]
    assert then.plan is not None and then.plan["asOf"] is not None
    assert recall(ORCH, query, databases=databases, as_of=ts(1)).memory_ids == [lisbon]
    assert recall(ORCH, query, databases=databases, as_of=ts(90)).memory_ids == []


def test_as_of_is_valid_time_and_known_at_transaction_time(databases: Databases,
                                                            embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    # True since 50 days ago, but only told to us 10 days ago.
    learnt = write(odb, embedder, "k1", content="The office has a rooftop garden",
                   createdAt=ts(10), validFrom=ts(50))
    query = "Does the office have a garden?"
    # what was true 30 days ago, whenever we were told: the garden
    then = recall(ORCH, query, databases=databases, as_of=ts(30))
    assert then.memory_ids == [learnt]
    assert then.plan is not None and then.plan["knownAt"] is None
    assert recall(ORCH, query, databases=databases, as_of=ts(60)).memory_ids == []
    # what we had been told by 30 days ago: nothing yet
    assert recall(ORCH, query, databases=databases, known_at=ts(30)).memory_ids == []
    assert recall(ORCH, query, databases=databases, known_at=ts(5)).memory_ids == [learnt]
    # both: true 30 days ago as we knew it then (not yet), as we knew it 5 days ago (yes)
    assert recall(ORCH, query, databases=databases, as_of=ts(30),
                  known_at=ts(20)).memory_ids == []
    assert recall(ORCH, query, databases=databases, as_of=ts(30),
                  known_at=ts(5)).memory_ids == [learnt]
    with pytest.raises(MemoryValidationError, match="known_at"):
        recall(ORCH, query, databases=databases, known_at="last week")


def test_a_conversation_imported_today_answers_for_its_own_dates(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    # stored now, said in May 2023 (a LoCoMo-style session with its own dates)
    said = write(odb, embedder, "k1", content="Caroline went to the LGBTQ support group",
                 validFrom="2023-05-07T13:56:00+00:00")
    query = "When did Caroline go to the support group?"
    may = recall(ORCH, query, databases=databases, as_of="2023-05-20T00:00:00+00:00")
    assert may.memory_ids == [said]
    assert recall(ORCH, query, databases=databases,
                  as_of="2023-04-01T00:00:00+00:00").memory_ids == []
    assert recall(ORCH, query, databases=databases, as_of="2023-05-20T00:00:00+00:00",
                  known_at="2023-05-20T00:00:00+00:00").memory_ids == []


@pytest.mark.parametrize("as_of", [
    (NOW + timedelta(days=2)).isoformat(), "yesterday", "2023-05-08T00:00:00"])
def test_a_bad_as_of_is_refused_naming_it(databases: Databases, embedder: Embedder,
                                          as_of: str) -> None:
    odb = databases.open(ORCH)
    write(odb, embedder, "k1", content="The office is in Porto")
    with pytest.raises(MemoryValidationError, match="as_of"):
        recall(ORCH, "office", databases=databases, as_of=as_of)


def test_latest_follows_updates_chains_to_the_head(databases: Databases,
                                                  embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    first = write(odb, embedder, "k1", content="The release is planned for March")
    second = write(odb, embedder, "k2", content="Release date: moved to April")
    third = write(odb, embedder, "k3", content="Shipping happens in June after the audit")
    apply_edit(odb, Supersede(op="supersede", memory_id=first, by=second), key="e1",
               task="edit")
    apply_edit(odb, Supersede(op="supersede", memory_id=second, by=third), key="e2",
               task="edit")
    query = "When is the release planned for March?"
    everything = recall(ORCH, query, databases=databases, include_inactive=True)
    assert everything.memory_ids[0] == first
    latest = recall(ORCH, query, databases=databases, latest=True)
    assert latest.memory_ids[0] == third
    assert len(latest.memory_ids) == len(set(latest.memory_ids))
    assert first not in latest.memory_ids and second not in latest.memory_ids
    assert latest.plan is not None and latest.plan["latest"] is True


def test_the_router_plan_is_in_the_bundle_and_a_window_favours_what_it_covers(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    may = write(odb, embedder, "k1", content="Dana visited the museum with her kids",
                validFrom="2023-05-20T10:00:00Z")
    june = write(odb, embedder, "k2", content="Dana visited the museum with her kids",
                 validFrom="2023-06-20T10:00:00Z")
    now = datetime(2023, 7, 1, tzinfo=UTC)
    plain = recall(ORCH, "Dana museum visit with kids", databases=databases, now=now,
                   route=False)
    assert set(plain.memory_ids[:2]) == {may, june} and plain.plan is None
    routed = recall(ORCH, "What did Dana do in June 2023?", databases=databases,
                    now=now, route=True)
    assert routed.plan is not None and routed.plan["intent"] == "entity_time"
    assert routed.plan["window"] == ["2023-06-01", "2023-06-30"]
    assert routed.memory_ids[0] == june


def test_export_and_import_carry_the_times_and_an_old_export_imports(
        tmp_path: Path, databases: Databases, embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    porto, lisbon = seed_move(odb, embedder)
    export_jsonl(odb, tmp_path / "out")
    records = [json.loads(line) for line in (tmp_path / "out" / "records.jsonl")
               .read_text().splitlines()]
    assert {r["memoryId"]: r["validTo"] for r in records}[porto] is not None
    other = Databases(make_settings(tmp_path / "other", ""))
    target = other.open(ORCH)
    import_folder(target, tmp_path / "out", embedder=embedder, batch_size=100)
    assert node(target, porto) == node(odb, porto)
    # An export written before schema 4 has no time fields: it imports, times unknown.
    old = tmp_path / "old"
    old.mkdir()
    for path in (tmp_path / "out").iterdir():
        text = path.read_text()
        if path.name == "records.jsonl":
            text = "".join(json.dumps({k: v for k, v in json.loads(line).items()
                                       if k not in ("validFrom", "validTo", "timeRefs")},
                                      sort_keys=True, separators=(",", ":")) + "\n"
                           for line in text.splitlines())
        (old / path.name).write_text(text)
    _rehash(old)
    third = Databases(make_settings(tmp_path / "third", "")).open(ORCH)
    import_folder(third, old, embedder=embedder, batch_size=100)
    assert "validTo" not in node(third, porto) and node(third, lisbon)["content"]


def _rehash(folder: Path) -> None:
    import hashlib
    import tomllib

    from orchmem.models.portability.export import MANIFEST, toml_text
    manifest = tomllib.loads((folder / MANIFEST).read_text())
    for name in manifest["sha256"]:
        manifest["sha256"][name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    (folder / MANIFEST).write_text(toml_text(manifest))


def test_a_hard_forget_clears_the_dated_phrases(databases: Databases,
                                                embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    memory_id = write(odb, embedder, "k1", content="The divorce was finalised on 3 March 2021")
    assert node(odb, memory_id)["timeRefs"]
    apply_edit(odb, Forget(op="forget", memory_id=memory_id, hard=True), key="f1", task="edit")
    row = odb.sql("SELECT content, time_refs FROM memories WHERE memory_id = ?", (memory_id,))
    assert row == [("", None)]


def test_the_router_brings_the_answer_that_follows_a_question(databases: Databases,
                                                              embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    turns = ["What are the names of your pets?", "Luna and Oliver!",
             "The weather was lovely at the lake", "I baked bread today"]
    other = "Pets need names that are easy to call"
    source = {"sourceType": "channel_transcript", "capturedBy": "extractor"}
    memories = [validate(MemoryInput, {"type": "Observation", "content": text,
                                       "source": {**source, "conversationId": conv}},
                         workspace=odb.workspace)
                for text, conv in [*((t, "chat-1") for t in turns), (other, "chat-2")]]
    ids = write_memories(odb, key="k1", task="t", memories=memories,
                         vectors=list(embedder.encode([m.content for m in memories])),
                         embedder=embedder.version)["memoryIds"]
    query = "What are the names of the pets?"
    plain = recall(ORCH, query, databases=databases, route=False)
    # The expansion alone: the lowering of what only asks is tested in test_recall_router.
    routed = recall(ORCH, query, databases=databases,
                    route=lambda q, now: replace(plan(q, now), asks_factor=1.0,
                                                 terse_factor=1.0))
    assert plain.memory_ids[0] == routed.memory_ids[0] == ids[0]

    def score(bundle: Any, memory_id: str) -> float:
        return float(next(n.scores.score for n in bundle.nodes
                          if n.memory.memory_id == memory_id))

    # The answer gets 0.9 of the question's score: more than the search gave it.
    assert score(routed, ids[1]) == pytest.approx(score(routed, ids[0]) * 0.9)
    assert score(routed, ids[1]) > score(plain, ids[1])
    assert routed.memory_ids.index(ids[1]) <= plain.memory_ids.index(ids[1])
    # A line of another conversation is no neighbour: it keeps its own score.
    assert score(routed, ids[4]) == pytest.approx(score(plain, ids[4]))
    assert routed.plan is not None and routed.plan["intent"] == "semantic"
    assert routed.plan["answerShare"] > routed.plan["expandShare"]


def test_the_recall_command_takes_as_of_latest_and_route(tmp_path: Path,
                                                         embedder: Embedder) -> None:
    from click.testing import CliRunner

    from orchmem.worker.cli.main import main

    settings = make_settings(tmp_path / "cli", "")
    odb = Databases(settings).open(ORCH)
    porto, lisbon = seed_move(odb, embedder)
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(main, ["--root", str(settings.root), "recall", "--orch", ORCH,
                                    "Where is the office?", "--local", *args])

    then = run("--as-of", ts(40), "--json")
    assert then.exit_code == 0, then.output
    assert [n["memory"]["memoryId"] for n in json.loads(then.output)["nodes"]] == [porto]
    known = run("--known-at", ts(40), "--json")
    assert known.exit_code == 0, known.output
    assert [n["memory"]["memoryId"] for n in json.loads(known.output)["nodes"]] == [porto]
    assert json.loads(known.output)["plan"]["knownAt"] is not None
    latest = run("--latest", "--route", "--json")
    assert latest.exit_code == 0, latest.output
    bundle = json.loads(latest.output)
    assert bundle["nodes"][0]["memory"]["memoryId"] == lisbon
    assert bundle["plan"]["latest"] is True and bundle["plan"]["intent"] == "semantic"
    unplanned = json.loads(run("--no-route", "--json").output)
    assert unplanned.get("plan") is None and unplanned["nodes"]
    assert json.loads(run("--json").output)["plan"]["intent"] == "semantic"  # on by default
    future = run("--as-of", (NOW + timedelta(days=3)).isoformat())
    assert future.exit_code != 0 and "as_of" in future.output and "future" in future.output
    bad = run("--known-at", "someday")
    assert bad.exit_code != 0 and "known_at" in bad.output


def test_latest_as_of_a_time_stops_at_what_was_known_then(databases: Databases,
                                                         embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    porto, lisbon = seed_move(odb, embedder)
    query = "Where is the office?"
    assert recall(ORCH, query, databases=databases, latest=True).memory_ids == [lisbon]
    assert recall(ORCH, query, databases=databases, latest=True,
                  as_of=ts(40)).memory_ids == [porto]
