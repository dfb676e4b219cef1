"""Episodic capture through the real worker: a transcript write-back with
``memory.writeback.episodic_summary`` on stores one summary of the exchange, linked to
its statements and recalled for "what did we talk about"; off, none.

A worker of its own (its own Redis), whose settings turn capture on for one orchestrator.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from orchmem_testing import RedisServer, WorkerProcess, make_settings, unique_id

from orchmem.config import Settings
from orchmem.models.core.shapes import MemoryNode
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.memories.edges import edges_touching
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.storage.visibility import DEFAULT_VIEW, EVERYTHING
from orchmem.worker import MemoryClient
from orchmem.worker.runtime.app import create_app

TIMEOUT = 90
ON = unique_id("capture-on")
ON_TOO = unique_id("capture-on-forget")
ON_AGAIN = unique_id("capture-on-again")
ON_WEEKDAY = unique_id("capture-on-weekday")
OFF = unique_id("capture-off")
TRANSCRIPT = {"conversationId": "trip-planning", "messages": [
    {"role": "user", "text": "Hi! I moved to Lisbon last month. I prefer window seats on "
                             "long flights.", "at": "2026-11-24T09:00:00Z"},
    {"role": "assistant", "text": "Noted. I booked the TAP flight to Oslo for Friday "
                                  "and asked for a window seat.", "at": "2026-11-24T09:01:00Z"},
    {"role": "user", "text": "Thanks!", "at": "2026-11-24T09:02:00Z"}]}
SUMMARY = ("user: I moved to Lisbon last month.\n"
           "assistant: I booked the TAP flight to Oslo for Friday and asked for a window "
           "seat.")


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Any]]:
    folder = tmp_path_factory.mktemp("capture")
    server = RedisServer(folder / "redis").start()
    on = {"memory": {"writeback": {"episodic_summary": True}}}
    settings = make_settings(folder / "root", f"{server.url}/0",
                             orchestrators={ON: on, ON_TOO: on, ON_AGAIN: on,
                                            ON_WEEKDAY: on})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        yield settings, app
    finally:
        worker.stop()
        server.stop()


def _write(capture: tuple[Settings, Any], orch: str) -> tuple[MemoryClient, dict[str, Any]]:
    settings, app = capture
    client = MemoryClient(orch, settings, app=app)
    result = client.write_back(transcript=TRANSCRIPT).wait(TIMEOUT)
    assert result is not None and result["ok"], result
    return client, result


def _memories(settings: Settings, orch: str) -> list[MemoryNode]:
    odb = Databases(settings).open(orch)
    return list_memories(odb, limit=100, view=EVERYTHING)


def test_capture_on_stores_one_linked_summary_recalled_for_what_we_talked_about(
        capture: tuple[Settings, Any]) -> None:
    client, result = _write(capture, ON)
    memories = {m.memory_id: m for m in _memories(capture[0], ON)}
    [summary] = [m for m in memories.values() if m.tier.value == "episodic"
                 and m.content.startswith("user: ")]
    assert summary.content == SUMMARY and summary.type.value == "Event"
    assert summary.source.conversation_id == "trip-planning"
    assert summary.valid_from == "2026-11-24T09:00:00.000000Z"
    statements = [m for m in memories.values() if m.memory_id != summary.memory_id]
    assert {m.type.value for m in statements} == {"Event", "Preference"}
    odb = Databases(capture[0]).open(ON)
    with odb.read():
        edges = [(e.from_memory_id, e.to_memory_id, e.edge_type)
                 for e in edges_touching([summary.memory_id])]
    assert sorted(edges) == sorted((m.memory_id, summary.memory_id, "PartOf")
                                   for m in statements)
    assert len(result["edgeIds"]) == len(statements)

    bundle = client.recall("What did we talk about the flight?", tiers=["episodic"])
    assert bundle.nodes and bundle.nodes[0].memory.memory_id == summary.memory_id, [
        n.memory.content for n in bundle.nodes]
    assert all(n.memory.tier.value == "episodic" for n in bundle.nodes)
    semantic = client.recall("What did we talk about the flight?", tiers=["semantic"])
    assert summary.memory_id not in [n.memory.memory_id for n in semantic.nodes]

    _write(capture, ON)  # the same exchange sent again adds no second summary
    assert len(_memories(capture[0], ON)) == len(memories)


def test_what_did_we_talk_about_on_a_weekday_finds_that_days_summary(
        capture: tuple[Settings, Any]) -> None:
    """An exchange of two days ago, asked about by its weekday ("on Tuesday"): the
    question names that day and nothing else, so the summary said in it is the answer,
    though its words share almost nothing with the question's."""
    settings, app = capture
    now = datetime.now(UTC)
    then = now - timedelta(days=2)
    at = then.strftime("%Y-%m-%dT%H:%M:%SZ")
    transcript = {**TRANSCRIPT, "messages": [{**m, "at": at} for m in TRANSCRIPT["messages"]]}
    result = MemoryClient(ON_WEEKDAY, settings, app=app).write_back(
        transcript=transcript).wait(TIMEOUT)
    assert result is not None and result["ok"], result
    [summary] = [m for m in _memories(settings, ON_WEEKDAY) if m.content == SUMMARY]
    view = replace(DEFAULT_VIEW, tiers=("episodic",))
    day = then.date().isoformat()
    bundle = recall(ON_WEEKDAY, f"What did we talk about on {then:%A}?",
                    databases=Databases(settings), now=now, view=view, route=True)
    assert bundle.plan and bundle.plan["window"] == [day, day], bundle.plan
    assert bundle.plan["windowOnly"] is True
    # the summary first; the exchange's episodic statement (the booking) was said then too
    assert [n.memory.memory_id for n in bundle.nodes][:1] == [summary.memory_id]
    assert all(n.memory.valid_from.startswith(day) for n in bundle.nodes)
    topical = recall(ON_WEEKDAY, f"What did we say about taxes on {then:%A}?",
                     databases=Databases(settings), now=now, view=view, route=True)
    assert topical.plan and topical.plan["windowOnly"] is False
    assert topical.nodes == []  # a topic of its own: the floor holds


def test_capture_off_stores_no_summary(capture: tuple[Settings, Any]) -> None:
    client, result = _write(capture, OFF)
    memories = _memories(capture[0], OFF)
    assert {m.type.value for m in memories} == {"Event", "Preference"}
    assert not any(m.content.startswith("user: ") for m in memories)
    assert result["edgeIds"] == []
    bundle = client.recall("What did we talk about the flight?", tiers=["episodic"])
    assert not any(n.memory.content.startswith("user: ") for n in bundle.nodes)


def test_hard_forget_of_a_statement_takes_the_summary_quoting_it(
        capture: tuple[Settings, Any]) -> None:
    client, _ = _write(capture, ON_TOO)
    memories = _memories(capture[0], ON_TOO)
    [summary] = [m for m in memories if m.content == SUMMARY]
    [preference] = [m for m in memories if m.type.value == "Preference"]
    [event] = [m for m in memories if m.type.value == "Event" and m is not summary]
    forgot = client.forget(preference.memory_id, hard=True).wait(TIMEOUT)
    assert forgot is not None and forgot["ok"], forgot
    left = {m.memory_id: m for m in _memories(capture[0], ON_TOO)}
    assert set(left) == {event.memory_id}  # linked to it (it may quote it): erased too
    assert not any("window seat" in m.content for m in left.values())
    bundle = client.recall("window seats on long flights", tiers=["episodic"])
    assert all("window" not in n.memory.content for n in bundle.nodes)
    # forgetting the summary alone keeps the statements
    client.write_back(transcript={**TRANSCRIPT, "conversationId": "again"}).wait(TIMEOUT)
    [second] = [m for m in _memories(capture[0], ON_TOO) if m.content == SUMMARY]
    forgot = client.forget(second.memory_id, hard=True).wait(TIMEOUT)
    assert forgot is not None and forgot["ok"], forgot
    kinds = sorted(m.type.value for m in _memories(capture[0], ON_TOO))
    assert kinds == ["Event", "Preference"]


def test_the_same_write_back_after_a_soft_forget_restates_the_summary_and_keeps_its_edges(
        capture: tuple[Settings, Any]) -> None:
    settings, app = capture
    client = MemoryClient(ON_AGAIN, settings, app=app)
    first = client.write_back(transcript=TRANSCRIPT, idempotency_key="again").wait(TIMEOUT)
    assert first is not None and first["ok"], first
    summary_id = first["memoryIds"][-1]
    forgot = client.forget(summary_id).wait(TIMEOUT)
    assert forgot is not None and forgot["ok"], forgot
    again = client.write_back(transcript=TRANSCRIPT, idempotency_key="again").wait(TIMEOUT)
    assert again is not None and again["ok"] and not again["duplicate"], again
    assert again["restated"] == [summary_id] and again["edgeIds"] == first["edgeIds"]
    [summary] = [m for m in _memories(settings, ON_AGAIN) if m.memory_id == summary_id]
    assert summary.status.value == "active" and summary.content == SUMMARY
