"""Write-back from transcripts, workflows and diagnostics; dedup, updates, contradictions, edits.

All on the real worker, real Redis, real SQLite and the real MiniLM model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from orchmem_testing import make_settings

from orchmem.config import MemoryValidationError, ScopeViolation, Settings
from orchmem.models.core.shapes import MemoryInput, Status, derive_id, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance.history import history
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.storage.search import fts, vectors
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.models.workspace.memlog import read_log
from orchmem.models.writeback.apply import write_memories
from orchmem.tasks.edits import EDIT
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import OrchmemCelery
from orchmem.worker.runtime.publish import publish

pytestmark = pytest.mark.usefixtures("worker")
TIMEOUT = 90


def run(app: OrchmemCelery, task: str, orch: str, payload: dict[str, Any]) -> dict[str, Any]:
    kind = "wb" if task == WRITEBACK else "edit"
    _, result = publish(app, task, orch, kind, payload)
    return dict(result.get(timeout=TIMEOUT))


def transcript(conversation: str, *messages: tuple[str, str]) -> dict[str, Any]:
    return {"channelTranscript": {"conversationId": conversation, "messages": [
        {"role": role, "text": text} for role, text in messages]}}


def active(settings: Settings, orch: str) -> list[Any]:
    odb = Databases(settings).open(orch)
    return list_memories(odb, limit=1000)


def db(settings: Settings, orch: str) -> OrchestratorDB:
    odb = Databases(settings).open(orch)
    assert odb is not None
    return odb


def test_transcript_yields_the_user_preference_and_identity_and_no_chatter(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    result = run(app, WRITEBACK, orch_id, transcript(
        "conv-1",
        ("user", "Hi there! My name is Priya Raman."),
        ("assistant", "Nice to meet you, Priya! How can I help today?"),
        ("user", "I prefer short answers with bullet points."),
        ("assistant", "Got it. I decided to keep things brief from now on."),
        ("user", "Thanks, what's the weather like?")))
    assert len(result["created"]) == 2
    nodes = {n.type.value: n for n in active(settings, orch_id)}
    assert set(nodes) == {"Identity", "Preference"}
    assert nodes["Identity"].content == "My name is Priya Raman."
    for node in nodes.values():
        assert node.source.source_type.value == "channel_transcript"
        assert node.source.conversation_id == "conv-1"
        assert node.source.captured_by.value == "extractor"


def test_workflow_json_yields_decisions_and_todos_with_run_and_step(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    result = run(app, WRITEBACK, orch_id, {"workflowOutput": {
        "workflowRunId": "run-7", "stepId": "plan", "output": {
            "decisions": ["Use Postgres for the ledger", {"content": "Ship behind a flag",
                                                          "importance": 90}],
            "todos": ["Write the migration script"],
            "summary": "not a memory key"}}})
    assert result["ignoredKeys"] == ["summary"]
    nodes = sorted(active(settings, orch_id), key=lambda n: n.content)
    assert [(n.type.value, n.content) for n in nodes] == [
        ("Decision", "Ship behind a flag"), ("Decision", "Use Postgres for the ledger"),
        ("Todo", "Write the migration script")]
    assert nodes[0].importance == 90
    for node in nodes:
        assert (node.source.workflow_run_id, node.source.step_id) == ("run-7", "plan")
        assert node.source.source_type.value == "workflow_output"


def test_workflow_text_output_goes_through_the_document_extractor(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    run(app, WRITEBACK, orch_id, {"workflowOutput": {
        "workflowRunId": "run-8", "stepId": "summarize",
        "output": "Decision: freeze the API on Friday.\nTODO: email the partners"}})
    assert sorted(n.type.value for n in active(settings, orch_id)) == ["Decision", "Todo"]


def test_bad_workflow_items_fail_the_task_with_their_path(app: OrchmemCelery,
                                                          orch_id: str) -> None:
    _, result = publish(app, WRITEBACK, orch_id, "wb", {"workflowOutput": {
        "workflowRunId": "r", "stepId": "s", "output": {"todos": ["ok", 42]}}})
    value = result.get(timeout=TIMEOUT, propagate=False)
    assert isinstance(value, MemoryValidationError)
    assert "workflowOutput.output.todos.1" in str(value)


def test_the_same_transcript_twice_changes_nothing_the_second_time(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    payload = transcript("conv-2", ("user", "I live in Porto."))
    first = run(app, WRITEBACK, orch_id, payload)
    odb = db(settings, orch_id)
    before = (len(active(settings, orch_id)), len(read_log(odb.workspace.log_path)))
    with odb.bound():
        events_before = odb.db.execute_sql("SELECT count(*) FROM memory_events").fetchone()[0]
    second = run(app, WRITEBACK, orch_id, payload)
    assert second["duplicate"] and second["memoryIds"] == first["memoryIds"]
    assert len(active(settings, orch_id)) == before[0]
    with odb.bound():
        assert odb.db.execute_sql("SELECT count(*) FROM memory_events").fetchone()[0] == \
            events_before


def counts(odb: OrchestratorDB) -> tuple[int, ...]:
    """Memories, sources and events in the file, and the sum of confidences."""
    with odb.bound():
        sql = odb.db.execute_sql
        return (sql("SELECT count(*) FROM memories").fetchone()[0],
                sql("SELECT count(*) FROM memory_sources").fetchone()[0],
                sql("SELECT count(*) FROM memory_events").fetchone()[0],
                sql("SELECT round(sum(confidence), 9) FROM memories").fetchone()[0])


def test_a_transcript_sent_again_under_a_new_key_changes_nothing(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    # An orchestrator that re-sends the whole conversation each turn, with a new key.
    said = transcript("c-r", ("user", "I prefer aisle seats."),
                      ("user", "I really prefer aisle seats!"))
    first = run(app, WRITEBACK, orch_id, {**said, "idempotencyKey": f"{orch_id}-turn-1"})
    [memory_id] = first["created"]
    assert first["reinforced"] == [memory_id]  # the second message, in other words
    odb = db(settings, orch_id)
    before = counts(odb)
    again = run(app, WRITEBACK, orch_id, {**said, "idempotencyKey": f"{orch_id}-turn-2"})
    assert not again["duplicate"]
    assert (again["created"], again["reinforced"]) == ([], [])
    assert again["unchanged"] == [memory_id, memory_id]
    assert counts(odb) == before
    # The same statement in another conversation is new evidence: reinforced, once.
    elsewhere = transcript("c-other", ("user", "I prefer aisle seats."))
    third = run(app, WRITEBACK, orch_id, {**elsewhere, "idempotencyKey": f"{orch_id}-turn-3"})
    assert third["reinforced"] == [memory_id]
    after_third = counts(odb)
    assert after_third[:3] == (before[0], before[1] + 1, before[2] + 1)
    assert after_third[3] > before[3]
    fourth = run(app, WRITEBACK, orch_id, {**elsewhere, "idempotencyKey": f"{orch_id}-turn-4"})
    assert fourth["unchanged"] == [memory_id] and counts(odb) == after_third
    data = history(odb, memory_id, EVERYTHING)
    assert [s["conversationId"] for s in data["sources"]] == ["c-r", "c-r", "c-other"]


def test_a_near_duplicate_reinforces_instead_of_duplicating(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    first = run(app, WRITEBACK, orch_id, transcript("c-a", ("user", "I prefer aisle seats.")))
    second = run(app, WRITEBACK, orch_id,
                 transcript("c-b", ("user", "I really prefer aisle seats!")))
    assert second["reinforced"] == first["created"]
    [node] = active(settings, orch_id)
    assert node.confidence > 0.9
    data = history(db(settings, orch_id), node.memory_id, EVERYTHING)
    assert [s["conversationId"] for s in data["sources"]] == ["c-a", "c-b"]
    assert [e["op"] for e in data["events"]] == ["create", "reinforce"]


NEAR = ("The build server runs out of memory after 40 minutes of nightly integration tests",
        "Build server ran out of memory after 40 minutes of nightly integration tests")


def fact(content: str) -> dict[str, Any]:
    return {"type": "Fact", "content": content,
            "source": {"sourceType": "manual", "capturedBy": "user"}}


def test_a_near_duplicate_without_a_subject_is_merged_by_its_embedding(
        app: OrchmemCelery, settings: Settings, embedder: Embedder, orch_id: str) -> None:
    cosine = float(np.dot(embedder.encode_one(NEAR[0]), embedder.encode_one(NEAR[1])))
    assert settings.memory.writeback.dedup_similarity <= cosine < 0.99
    [first] = run(app, WRITEBACK, orch_id, {"memories": [fact(NEAR[0])]})["created"]
    second = run(app, WRITEBACK, orch_id, {"memories": [fact(NEAR[1])]})
    assert second["created"] == [] and second["reinforced"] == [first]
    data = history(db(settings, orch_id), first, EVERYTHING)
    # Not the fingerprint path (other words) nor the subject path (none): the vectors.
    assert data["memory"]["subject"] is None
    assert [e["op"] for e in data["events"]] == ["create", "reinforce"]
    # Control: the same wording with another number is as close, but a different fact.
    other = NEAR[0].replace("40", "25")
    assert float(np.dot(embedder.encode_one(NEAR[0]), embedder.encode_one(other))) > cosine
    assert run(app, WRITEBACK, orch_id, {"memories": [fact(other)]})["created"]
    assert len(active(settings, orch_id)) == 2


def test_a_near_duplicate_is_kept_apart_when_dedup_similarity_is_one(
        settings: Settings, embedder: Embedder, tmp_path: Path) -> None:
    strict = make_settings(tmp_path, settings.broker_url,
                           memory={"writeback": {"dedup_similarity": 1.0}})
    odb = Databases(strict).open("strict-dedup")
    assert odb is not None
    for i, content in enumerate(NEAR):
        memory = validate(MemoryInput, fact(content))
        result = write_memories(odb, key=f"k{i}", task="t", memories=[memory],
                                vectors=[embedder.encode_one(content)],
                                embedder=embedder.version)
        assert len(result["created"]) == 1 and result["reinforced"] == []
    assert len(list_memories(odb)) == 2


def test_a_changed_preference_supersedes_the_old_one_with_an_updates_edge(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    old = run(app, WRITEBACK, orch_id, transcript("c1", ("user", "I prefer coffee in the "
                                                                "morning.")))["created"][0]
    new = run(app, WRITEBACK, orch_id, transcript("c2", ("user", "I prefer tea in the "
                                                                "morning.")))
    assert new["superseded"] == [old]
    odb = db(settings, orch_id)
    data = history(odb, old, EVERYTHING)
    assert data["memory"]["status"] == "superseded"
    assert any(e["edgeType"] == "Updates" and e["fromMemoryId"] == new["created"][0]
               for e in data["edges"])
    assert [n.content for n in active(settings, orch_id)] == ["I prefer tea in the morning."]
    # Unrelated preferences are left alone.
    other = run(app, WRITEBACK, orch_id, transcript("c3", ("user", "I prefer window seats.")))
    assert other["superseded"] == [] and other["contradicted"] == []


def test_an_inferred_contradiction_keeps_both_with_a_contradicts_edge(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    stated = run(app, WRITEBACK, orch_id, transcript("c1", ("user", "The deadline is Friday.")))
    inferred = run(app, WRITEBACK, orch_id, {"workflowOutput": {
        "workflowRunId": "r1", "stepId": "s1", "output": {"facts": ["The deadline is Monday"]}}})
    assert inferred["contradicted"] == [[inferred["created"][0], stated["created"][0]]]
    nodes = active(settings, orch_id)
    assert {n.content for n in nodes} == {"The deadline is Friday.", "The deadline is Monday"}
    bundle = recall(orch_id, "when is the deadline", databases=Databases(settings))
    by_id = {n.memory.memory_id: n for n in bundle.nodes}
    assert by_id[stated["created"][0]].scores.contradiction < 1.0
    assert by_id[inferred["created"][0]].scores.contradiction == 1.0
    assert any(e.edge_type.value == "Contradicts" for e in bundle.edges)


def test_diagnostics_findings_become_observations_weighted_by_severity(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    run(app, WRITEBACK, orch_id, {"diagnostics": {"runId": "diag-1", "findings": [
        {"severity": "critical", "component": "db", "text": "Disk 95% full on the primary"},
        {"severity": "info", "text": "Nightly backup took 12 minutes"}]}})
    nodes = sorted(active(settings, orch_id), key=lambda n: -n.importance)
    assert [(n.type.value, n.importance) for n in nodes] == [("Observation", 90),
                                                             ("Observation", 35)]
    assert nodes[0].content == "[critical] db: Disk 95% full on the primary"
    assert nodes[0].source.source_type.value == "diagnostics"
    assert nodes[0].source.workflow_run_id == "diag-1"


def on_disk(db_path: Path) -> bytes:
    """Every byte of the database as it is on disk: the file, its WAL and shared memory."""
    files = [db_path.with_name(db_path.name + suffix) for suffix in ("", "-wal", "-shm")]
    return b"".join(f.read_bytes() for f in files if f.exists())


def test_retract_and_hard_forget_leave_the_right_audit_rows(
        app: OrchmemCelery, settings: Settings, embedder: Embedder, orch_id: str) -> None:
    ids = run(app, WRITEBACK, orch_id, {"memories": [
        {"type": "Fact", "content": "The staging password hint is blue-falcon",
         "source": {"sourceType": "manual", "capturedBy": "user"}},
        {"type": "Fact", "content": "The office moved to the fourth floor",
         "source": {"sourceType": "manual", "capturedBy": "user"}}]})["created"]
    secret, office = ids
    run(app, EDIT, orch_id, {"op": "retract", "memoryId": office, "reason": "outdated"})
    run(app, EDIT, orch_id, {"op": "forget", "memoryId": secret, "hard": True,
                             "reason": "user asked to erase it"})
    odb = db(settings, orch_id)
    office_events = history(odb, office, EVERYTHING)["events"]
    assert [e["op"] for e in office_events] == ["create", "retract"]
    assert office_events[-1]["reason"] == "outdated"
    forgotten = history(odb, secret, EVERYTHING)
    assert [e["op"] for e in forgotten["events"]] == ["create", "forget_hard"]
    assert forgotten["memory"]["content"] == "" and forgotten["memory"]["forgotten"]
    assert forgotten["sources"] == []
    assert "blue-falcon" not in str(forgotten)
    # Gone from every read path.
    databases = Databases(settings)
    assert fts.search(odb, "blue falcon password", limit=10,
                      statuses=["active", "retracted", "superseded"]) == []
    hits, _ = vectors.search(odb, embedder.encode_one("staging password hint"),
                             embedder=embedder.version, limit=10)
    assert secret not in [h.memory_id for h in hits]
    for include in (False, True):
        bundle = recall(orch_id, "staging password hint blue-falcon", databases=databases,
                        include_inactive=include)
        assert secret not in bundle.memory_ids
    with odb.bound():
        raw = odb.db.execute_sql("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH "
                                 "'falcon'").fetchone()[0]
    assert raw == 0
    assert b"blue-falcon" not in on_disk(odb.workspace.db_path)


def test_supersede_link_and_edit_errors(app: OrchmemCelery, settings: Settings,
                                        orch_id: str) -> None:
    [old] = run(app, WRITEBACK, orch_id, {"memories": [{
        "type": "Decision", "content": "Release on the 1st",
        "source": {"sourceType": "manual", "capturedBy": "user"}}]})["created"]
    done = run(app, EDIT, orch_id, {"op": "supersede", "memoryId": old,
                                    "content": "Release on the 15th", "reason": "slipped"})
    new = done["supersededBy"]
    [goal] = run(app, WRITEBACK, orch_id, {"memories": [{
        "type": "Goal", "content": "Reach 1k users",
        "source": {"sourceType": "manual", "capturedBy": "user"}}]})["created"]
    linked = run(app, EDIT, orch_id, {"op": "link", "fromMemoryId": new, "toMemoryId": goal,
                                      "edgeType": "CausedBy", "weight": 0.6, "reason": "growth"})
    odb = db(settings, orch_id)
    assert {e["edgeType"] for e in history(odb, new, EVERYTHING)["edges"]} == {"Updates",
                                                                                "CausedBy"}
    assert history(odb, old, EVERYTHING)["memory"]["status"] == Status.SUPERSEDED.value
    assert linked["edgeIds"]
    for payload, error in [
        ({"op": "retract", "memoryId": old, "reason": "x"}, MemoryValidationError),
        ({"op": "retract", "memoryId": derive_id("m", "someone-else", "k", 0), "reason": "x"},
         ScopeViolation),
        ({"op": "explode", "memoryId": old}, MemoryValidationError),
        ({"op": "supersede", "memoryId": new}, MemoryValidationError),
    ]:
        _, result = publish(app, EDIT, orch_id, "edit", payload)
        value = result.get(timeout=TIMEOUT, propagate=False)
        assert isinstance(value, error), (payload, value)
    log = read_log(odb.workspace.log_path)
    assert any(r["event"] == "task_failed" and r["error"] == "scope_violation" for r in log)


def test_a_hard_forget_leaves_no_word_in_subjects_reasons_or_the_index(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    [hiking] = run(app, WRITEBACK, orch_id, transcript(
        "c1", ("user", "I like hiking in the Alps.")))["created"]
    changed = run(app, WRITEBACK, orch_id, transcript(
        "c2", ("user", "I no longer like hiking in the Alps.")))
    [no_longer] = changed["created"]
    assert changed["superseded"] == [hiking]
    odb = db(settings, orch_id)
    [edge] = history(odb, hiking, EVERYTHING)["edges"]
    assert "alps" in edge["reason"]  # "restates like:hiking in alps"
    run(app, EDIT, orch_id, {"op": "forget", "memoryId": hiking, "hard": True,
                             "reason": "user asked to erase it"})
    data = history(odb, hiking, EVERYTHING)
    assert [e["op"] for e in data["events"]] == ["create", "supersede", "link", "forget_hard"]
    assert all(e["reason"] is None for e in data["events"][:-1])
    assert data["events"][-1]["reason"] == "user asked to erase it"
    assert "subject" not in data["events"][0]["after"]
    assert [e.get("reason") for e in data["edges"]] == [None]
    # The newer memory says those words itself: it keeps them, and its subject.
    kept = history(odb, no_longer, EVERYTHING)
    assert kept["memory"]["content"] == "I no longer like hiking in the Alps."
    assert kept["memory"]["subject"] == "like:hiking in alps"
    # A replacement in other words inherits the subject; forgetting the memory that
    # gave it takes the subject away too.
    climbing = run(app, EDIT, orch_id, {"op": "supersede", "memoryId": no_longer,
                                        "content": "These days I prefer climbing gyms"})[
        "supersededBy"]
    assert history(odb, climbing, EVERYTHING)["memory"]["subject"] == "like:hiking in alps"
    run(app, EDIT, orch_id, {"op": "forget", "memoryId": no_longer, "hard": True})
    assert history(odb, climbing, EVERYTHING)["memory"]["subject"] is None
    assert history(odb, climbing, EVERYTHING)["memory"]["content"] == \
        "These days I prefer climbing gyms"
    raw = on_disk(odb.workspace.db_path).lower()  # no checkpoint here: what the forget left
    for word in (b"alps", b"hiking", b"hike"):  # "hike": the FTS index's stemmed token
        assert word not in raw, word
