"""Property of governance: over random mixes of memories and requests, no restricted memory
ever appears in a bulletin, a context or a default recall, and no session's memory in
another session's recall.

Each example writes a few memories (random scope, session, project, sensitivity, some
with a secret the detector must catch) through the in-process client, then asks random
recalls, bulletins and contexts. Every memory an answer shows is checked against the
request's view with the values stored for it. The ledger counts the answers that
showed memories (the checks had something to check) and the restricted or other-session
memories a wider read could see but the request did not get.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from orchmem_testing import free_port, make_settings, unique_id

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.storage.visibility import EVERYTHING, View
from orchmem.worker import MemoryClient

WORDS = ("harbor", "falcon", "ledger", "orchid", "quartz")
SESSIONS = ("s1", "s2", "s3")
PROJECTS = ("p1", "p2")
_ID = re.compile(r"m-[0-9a-f]{8}-[0-9a-f]{16}")


@dataclass
class Ledger:
    examples: int = 0
    answers_with_memories: int = 0
    hidden_seen_by_a_wider_read: int = 0


LEDGER = Ledger()

memory_specs = st.fixed_dictionaries({
    "word": st.sampled_from(WORDS),
    "scope": st.sampled_from(["global", "session", "project"]),
    "session": st.sampled_from(SESSIONS),
    "project": st.sampled_from(PROJECTS),
    "sensitivity": st.sampled_from([None, "public", "confidential", "restricted"]),
    "secret": st.booleans(),
})
request_specs = st.fixed_dictionaries({
    "word": st.sampled_from(WORDS),
    "session": st.sampled_from([None, *SESSIONS]),
    "project": st.sampled_from([None, *PROJECTS]),
})


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> MemoryClient:
    root = tmp_path_factory.mktemp("governance-property")
    return MemoryClient(unique_id("prop"), make_settings(
        root, f"redis://127.0.0.1:{free_port()}/0"), immediate=True)


def _memory(spec: dict[str, Any], n: int) -> dict[str, Any]:
    secret = f" the door password is Gate{n}x!" if spec["secret"] else ""
    memory: dict[str, Any] = {
        "type": "Fact", "content": f"The {spec['word']} note number {n}{secret}",
        "source": {"sourceType": "manual", "capturedBy": "user"}, "scope": spec["scope"]}
    if spec["scope"] == "session" or n % 2:
        memory["sessionId"] = spec["session"]
    if spec["scope"] == "project":
        memory["projectId"] = spec["project"]
    if spec["sensitivity"]:
        memory["sensitivity"] = spec["sensitivity"]
    return memory


def _check(client: MemoryClient, view: View, ids: list[str], where: str) -> None:
    for node in client.get(ids, view=EVERYTHING, purpose="test oracle"):
        m = node.dump()
        assert view.sees(m["scope"], m.get("sessionId"), m.get("projectId"),
                         m["sensitivity"], m["tags"]), (where, view, m)
    LEDGER.answers_with_memories += bool(ids)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(memories=st.lists(memory_specs, min_size=1, max_size=6),
       requests=st.lists(request_specs, min_size=1, max_size=3))
def _example(client: MemoryClient, memories: list[dict[str, Any]],
             requests: list[dict[str, Any]]) -> None:
    LEDGER.examples += 1
    base = LEDGER.examples * 10
    result = client.write_back(memories=[_memory(s, base + i) for i, s in enumerate(memories)])
    assert result.ok and (result.wait() or {}).get("ok"), result
    for req in requests:
        view = View(session_id=req["session"], project_id=req["project"])
        query = f"{req['word']} note"
        bundle = client.recall(query, session_id=req["session"], project_id=req["project"])
        _check(client, view, bundle.memory_ids, "recall")
        wider = client.recall(query, session_id=req["session"], project_id=req["project"],
                              include_restricted=True, purpose="property test")
        LEDGER.hidden_seen_by_a_wider_read += len(set(wider.memory_ids) - set(bundle.memory_ids))
        bulletin = client.bulletin(session_id=req["session"], project_id=req["project"])
        _check(client, view, _ID.findall(bulletin.text), "bulletin")
        context = client.context_for("step", query, session_id=req["session"],
                                     project_id=req["project"])
        _check(client, view, _ID.findall(context.text), "context")
        if req["session"] is None:  # the worker-built global bulletin too
            _check(client, View(), _ID.findall(client.bulletin().text), "global bulletin")


def test_no_restricted_and_no_other_session_memory_leaks(client: MemoryClient) -> None:
    _example(client)
    # the examples wrote, recalled and found: the checks had something to check
    assert LEDGER.examples >= 40, LEDGER
    assert LEDGER.answers_with_memories >= LEDGER.examples, LEDGER
    assert LEDGER.hidden_seen_by_a_wider_read > 0, LEDGER
