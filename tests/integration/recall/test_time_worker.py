"""Time on memories through the real worker: a transcript's message times become
validFrom, bad times are refused at the door, and recall as of a time and the latest
state answer from what the worker wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchmem.config import Settings
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import OrchmemCelery

pytestmark = pytest.mark.usefixtures("worker")

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
TIMEOUT = 60
NOW = datetime.now(UTC)


def ts(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_transcript_message_time_becomes_valid_from(app: OrchmemCelery, settings: Settings,
                                                      orch_id: str) -> None:
    client = MemoryClient(orch_id, settings, app=app)
    said = "2023-05-08T13:56:00.000000Z"
    handle = client.write_back(transcript={
        "conversationId": "conv-1", "channel": "web",
        "messages": [{"role": "user", "at": said,
                      "text": "I prefer tea to coffee since last week."}]})
    result = handle.wait(TIMEOUT)
    assert result is not None and result["ok"], result
    [memory_id] = result["created"]
    bundle = client.recall("What does the user prefer to drink?", latest=True)
    node = next(n.memory for n in bundle.nodes if n.memory.memory_id == memory_id)
    assert node.valid_from == said and node.created_at == said
    assert node.time_refs == [{"text": "last week", "from": "2023-05-01", "to": "2023-05-07"}]


def test_a_valid_to_before_valid_from_is_refused_and_nothing_is_written(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings, app=app)
    handle = client.write_back(memories=[{
        "type": "Fact", "content": "The sale runs", "source": MANUAL,
        "validFrom": ts(1), "validTo": ts(3)}])
    assert not handle.ok and handle.error == "validation"
    assert [e["path"] for e in handle.errors] == ["memories.0.validTo"]
    assert client.recall("sale", wait_for_writes=False).nodes == []


def test_as_of_and_latest_answer_from_what_the_worker_wrote(
        app: OrchmemCelery, settings: Settings, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings, app=app)
    first = client.write_back(memories=[{
        "type": "Fact", "content": "The support line is staffed by Ana", "source": MANUAL,
        "createdAt": ts(60), "validFrom": ts(60)}]).wait(TIMEOUT)
    second = client.write_back(memories=[{
        "type": "Fact", "content": "Bruno now staffs the support line", "source": MANUAL,
        "createdAt": ts(20), "validFrom": ts(20)}]).wait(TIMEOUT)
    assert first and second
    [ana], [bruno] = first["memoryIds"], second["memoryIds"]
    done = client.supersede(ana, by=bruno, reason="rota changed").wait(TIMEOUT)
    assert done is not None and done["ok"], done
    query = "Who staffs the support line, Ana?"
    assert client.recall(query, as_of=ts(40)).memory_ids == [ana]
    assert client.recall(query, as_of=ts(10)).memory_ids[0] == bruno
    latest = client.recall(query, latest=True)
    assert latest.memory_ids[0] == bruno and ana not in latest.memory_ids
    future = client.recall(query, as_of=(NOW + timedelta(days=1)).isoformat())
    assert future.nodes == [] and any("as_of" in w for w in future.warnings)
