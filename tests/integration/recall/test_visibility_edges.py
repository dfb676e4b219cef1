"""The view holds beyond recall's list: neighbours, edges, supersedes, links, sessions,
history and reads by id, through the real worker, the CLI and HTTP.

A restricted memory (an AWS access key the secret detector catches) is joined to a
global one by an edge; a recall of the global one must not show the key in
``neighbors`` or ``edges``, in Python, ``orchmem recall --json`` or ``GET /recall``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_testing import start_api
from orchmem_testing import WorkerProcess, settings_env

from orchmem.config import Settings
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.worker import MemoryClient

KEY = "Use the AWS access key AKIAZ7QW3ER5TY8UI9OP for the backup job"
JOB = "The nightly backup job runs at 02:00 UTC"
QUERY = "when does the nightly backup run"
SOURCE = {"sourceType": "manual", "capturedBy": "user"}
TIMEOUT = 60


def _write(client: MemoryClient, memories: list[dict[str, Any]],
           edges: list[dict[str, Any]] | None = None) -> list[str]:
    result = client.write_back(memories=[{"type": "Fact", "source": SOURCE, **m}
                                         for m in memories], edges=edges).wait(TIMEOUT)
    assert result and result["ok"], result
    return list(result["memoryIds"])


def _ok(handle: Any) -> dict[str, Any]:
    result = handle.wait(TIMEOUT)
    assert result and result["ok"], result
    return dict(result)


def _shown(answer: Any) -> str:
    return answer if isinstance(answer, str) else json.dumps(answer, default=str)


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("orchmem")), *args]
    return subprocess.run(command, env=settings_env(settings), capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture
def client(settings: Settings, worker: WorkerProcess, orch_id: str) -> Iterator[MemoryClient]:
    with MemoryClient(orch_id, settings) as memory:
        yield memory


def test_a_restricted_memory_is_no_neighbour_in_python_cli_or_http(
        settings: Settings, client: MemoryClient, orch_id: str) -> None:
    key, job = _write(client, [{"content": KEY, "key": "k"}, {"content": JOB, "key": "j"}],
                      [{"fromMemoryId": "k", "toMemoryId": "j", "edgeType": "PartOf"}])
    assert client.get([key], include_restricted=True, purpose="check")[0].sensitivity == \
        "restricted"
    bundle = client.recall(QUERY)
    assert job in bundle.memory_ids
    assert key not in _shown(bundle.dump()) and "AKIA" not in _shown(bundle.dump())
    assert bundle.edges == [] and bundle.neighbors == []
    # a restricted read with a purpose sees both, edge included
    wide = client.recall(QUERY, include_restricted=True, purpose="incident review")
    assert key in {n.memory_id for n in wide.neighbors} | set(wide.memory_ids)
    assert [e.edge_type.value for e in wide.edges] == ["PartOf"]
    cli = _cli(settings, "recall", "--orch", orch_id, "--json", QUERY)
    assert cli.returncode == 0, cli.stderr
    assert job in cli.stdout and key not in cli.stdout and "AKIA" not in cli.stdout
    api = start_api(settings, [orch_id])
    try:
        reply = httpx.get(f"{api.url}/v1/orchestrators/{orch_id}/recall", params={"q": QUERY},
                          headers=api.auth(orch_id), timeout=TIMEOUT)
    finally:
        api.stop()
    assert reply.status_code == 200, reply.text
    assert job in reply.text and key not in reply.text and "AKIA" not in reply.text


def test_supersede_and_link_do_not_reveal_a_restricted_memory(client: MemoryClient) -> None:
    key, job = _write(client, [{"content": KEY}, {"content": JOB}])
    _ok(client.supersede(key, by=job))  # the key's successor is the job memory
    _ok(client.link(key, job, "RelatedTo"))
    for latest in (False, True):
        for inactive in (False, True):
            bundle = client.recall(QUERY, latest=latest, include_inactive=inactive)
            assert job in bundle.memory_ids, (latest, inactive)
            text = _shown(bundle.dump())
            assert key not in text and "AKIA" not in text, (latest, inactive)


def test_a_session_memory_is_a_neighbour_only_in_its_own_session(client: MemoryClient) -> None:
    mine, job = _write(client, [
        {"content": "The backup window of session one moves to 03:00", "scope": "session",
         "sessionId": "S1", "key": "s"}, {"content": JOB, "key": "j"}],
        [{"fromMemoryId": "s", "toMemoryId": "j", "edgeType": "RelatedTo"}])
    other = client.recall(QUERY, session_id="S2")
    assert job in other.memory_ids
    assert mine not in _shown(other.dump()) and "03:00" not in _shown(other.dump())
    own = client.recall(QUERY, session_id="S1")
    shown = {n.memory_id for n in own.neighbors} | set(own.memory_ids)
    assert mine in shown and any(mine in (e.from_memory_id, e.to_memory_id) for e in own.edges)


def test_history_and_get_follow_the_view(settings: Settings, client: MemoryClient,
                                         orch_id: str) -> None:
    key, job = _write(client, [{"content": KEY, "key": "k"}, {"content": JOB, "key": "j"}],
                      [{"fromMemoryId": "k", "toMemoryId": "j", "edgeType": "PartOf"}])
    assert [n.memory_id for n in client.get([key, job])] == [job]
    assert [n.memory_id for n in client.get([key, job], view=EVERYTHING, purpose="audit")] \
        == [key, job]
    with pytest.raises(Exception, match="purpose"):
        client.get([key], include_restricted=True)
    shown = _cli(settings, "history", "--orch", orch_id, "--json", job)
    assert shown.returncode == 0, shown.stderr
    assert key not in shown.stdout and "AKIA" not in shown.stdout
    hidden = _cli(settings, "history", "--orch", orch_id, "--json", key)
    assert hidden.returncode != 0 and "AKIA" not in hidden.stdout + hidden.stderr
    wide = _cli(settings, "history", "--orch", orch_id, "--json", "--include-restricted",
                "--purpose", "incident review", key)
    assert wide.returncode == 0, wide.stderr
    assert json.loads(wide.stdout)["memory"]["memoryId"] == key
    log = (settings.runtime_root(orch_id) / "memory" / "logs" / "memory.log").read_text()
    assert log.count('"restricted_read"') >= 2  # the get and the history, audited


def test_a_contradiction_the_reader_may_not_see_does_not_lower_a_score(
        client: MemoryClient) -> None:
    job, key = _write(client, [{"content": JOB}, {"content": KEY}])
    _ok(client.link(key, job, "Contradicts"))  # the restricted key contradicts the job

    def contradiction(**wide: Any) -> float:
        [node] = [n for n in client.recall(QUERY, **wide).nodes if n.memory.memory_id == job]
        return node.scores.contradiction

    assert contradiction() == 1.0  # as if the key were not there: it is not, for this reader
    assert contradiction(include_restricted=True, purpose="incident review") < 1.0
    assert contradiction() == 1.0  # the row cache keeps each view's features apart
