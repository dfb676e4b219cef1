"""Episodes are placed like memories: the scope of their run, the
sensitivity of the most sensitive memory they link; ``recall(..., episodes=True)``
returns only those the request's view may see. In-process mode, real SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings

from orchmem.models.workspace.memlog import read_log
from orchmem.worker import MemoryClient

ORCH = "episode-scope-bot"
QUERY = "rotate the signing keys"


@pytest.fixture
def memory(tmp_path: Path) -> MemoryClient:
    return MemoryClient(ORCH, make_settings(tmp_path / "root", ""), immediate=True)


def a_run(memory: MemoryClient, content: str, *, sensitivity: str | None = None,
          **placement: Any) -> str:
    """A run that rotated the signing keys and wrote ``content``; returns its run id."""
    with memory.run("rotate the signing keys", **placement) as run, \
            run.step("rotate") as step:
        step.prompt("Rotate the signing keys of the billing service.")
        extra = {"sensitivity": sensitivity} if sensitivity else {}
        done = step.write_back(memories=[{"type": "Fact", "content": content, **extra}]
                               ).wait(30)
        assert done is not None and done["ok"], done
    return run.run_id


def episode_runs(memory: MemoryClient, **view: Any) -> set[str]:
    bundle = memory.recall(QUERY, episodes=True, top_n=5, **view)
    return {e["runId"] for e in bundle.episodes}


def test_a_session_episode_is_seen_from_its_session_only(memory: MemoryClient) -> None:
    mine = a_run(memory, "The signing keys of billing were rotated on Monday",
                 session_id="s-1")
    talk = a_run(memory, "Keys of the ledger were rotated too", conversation_id="c-9")
    shared = a_run(memory, "Key rotation takes ten minutes")
    assert episode_runs(memory, session_id="s-1") == {mine, shared}
    assert episode_runs(memory, session_id="s-2") == {shared}
    assert episode_runs(memory) == {shared}
    # a run's conversation is its session when it names none
    assert episode_runs(memory, session_id="c-9") == {talk, shared}
    placed = {e["runId"]: e for e in memory.recall(QUERY, episodes=True,
                                                   session_id="s-1").episodes}
    assert (placed[mine]["scope"], placed[mine]["sessionId"]) == ("session", "s-1")
    assert placed[shared]["scope"] == "global"


def test_a_project_episode_is_seen_from_its_project(memory: MemoryClient) -> None:
    theirs = a_run(memory, "Billing keys live in the vault", project_id="p-billing")
    assert episode_runs(memory, project_id="p-billing") == {theirs}
    assert episode_runs(memory, project_id="p-other") == set()
    assert episode_runs(memory, session_id="s-1") == set()


def test_an_episode_linking_a_restricted_memory_needs_include_restricted(
        memory: MemoryClient) -> None:
    secret = a_run(memory, "The old signing key was leaked in March",
                   sensitivity="restricted")
    plain = a_run(memory, "The new signing key is 4096 bits")
    assert episode_runs(memory) == {plain}
    bundle = memory.recall(QUERY, episodes=True, include_restricted=True,
                           purpose="incident review")
    placed = {e["runId"]: e for e in bundle.episodes}
    assert set(placed) == {secret, plain}
    assert placed[secret]["sensitivity"] == "restricted"
    assert placed[plain]["sensitivity"] == "internal"
    assert len(placed[secret]["memoryIds"]) == 1
    odb = memory.databases.open(ORCH)
    assert odb is not None
    [audited] = [r for r in read_log(odb.workspace.log_path) if r["event"] == "restricted_read"]
    assert audited["episodeIds"] == [placed[secret]["episodeId"]]


def test_an_episode_lists_only_the_memories_the_view_sees(memory: MemoryClient) -> None:
    with memory.run("rotate the signing keys") as run, run.step("rotate") as step:
        step.prompt("Rotate the signing keys of the billing service.")
        done = step.write_back(memories=[
            {"type": "Fact", "content": "Rotation of the keys is monthly"},
            {"type": "Fact", "content": "Session s-1 asked for the key rotation",
             "scope": "session", "sessionId": "s-1"}]).wait(30)
        assert done is not None and done["ok"], done
    everyone, session = done["memoryIds"]
    [seen] = memory.recall(QUERY, episodes=True).episodes
    assert seen["runId"] == run.run_id and seen["memoryIds"] == [everyone]
    [own] = memory.recall(QUERY, episodes=True, session_id="s-1").episodes
    assert sorted(own["memoryIds"]) == sorted([everyone, session])
