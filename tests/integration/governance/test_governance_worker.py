"""Governance through the real worker and the CLI: scope isolation between
sessions, restricted reads, retention, and every selector of ``orchmem forget``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from orchmem_testing import WorkerProcess, settings_env

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.models.workspace.memlog import read_log
from orchmem.worker import MemoryClient
from orchmem.worker.cli.main import main

#: What a test's oracle reads: every memory, restricted ones with a purpose.
EVERY: dict[str, Any] = {"view": EVERYTHING, "purpose": "test oracle"}


def cli(settings: Settings, *args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(main, [*args, "--json"], env=settings_env(settings))
    assert result.exit_code == code, result.output
    return json.loads(result.output) if code == 0 else result.output


def written(settings: Settings, orch_id: str, content: str, *flags: str) -> str:
    out = cli(settings, "write", "--orch", orch_id, "--type", "Fact", "--content", content,
              *flags)
    return str(out["memoryIds"][0])


def test_sessions_are_isolated_and_restricted_reads_need_a_purpose(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    shared = written(settings, orch_id, "The team standup is at nine")
    alma = written(settings, orch_id, "Alma runs the standup this week", "--scope", "session",
                   "--session", "s-alma", "--tag", "standup")
    bruno = written(settings, orch_id, "Bruno skips the standup on Fridays", "--scope",
                    "session", "--session", "s-bruno")
    secret = written(settings, orch_id, "The standup dial-in password is Kestrel-8812")
    listed = {m["memoryId"] for m in cli(settings, "list", "--orch", orch_id, "--session",
                                         "s-alma")["memories"]}
    assert listed == {shared, alma}
    recalled = cli(settings, "recall", "--orch", orch_id, "standup", "--session", "s-bruno",
                   "--local")
    assert {n["memory"]["memoryId"] for n in recalled["nodes"]} == {shared, bruno}
    client = MemoryClient(orch_id, settings)
    assert client.recall("standup", session_id="s-alma", tags=["standup"]).memory_ids == [alma]
    assert alma not in client.bulletin(timeout=30).text and secret not in \
        client.bulletin(timeout=30).text
    refused = cli(settings, "recall", "--orch", orch_id, "standup", "--include-restricted",
                  code=2)
    assert "purpose" in refused
    allowed = cli(settings, "recall", "--orch", orch_id, "dial-in password",
                  "--include-restricted", "--purpose", "incident review", "--local")
    assert secret in {n["memory"]["memoryId"] for n in allowed["nodes"]}
    log = read_log(client.databases.workspace(orch_id).log_path)
    assert [(r["purpose"], r["memoryIds"]) for r in log if r["event"] == "restricted_read"] \
        == [("incident review", [secret])]
    stats = cli(settings, "stats", "--orch", orch_id)["governance"]
    assert stats["byScope"] == {"global": 2, "project": 0, "session": 2}
    assert stats["bySensitivity"]["restricted"] == 1


def _ingested(settings: Settings, orch_id: str, client: MemoryClient) -> tuple[str, str]:
    folder = client.databases.workspace(orch_id).ingest_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.md").write_text("The vendor contract renews in May.\n", "utf-8")
    done = client.ingest_now().wait(60)
    assert done and done["ok"], done
    [entry] = [f for f in done["files"] if f["outcome"] == "ingested"]
    [memory] = client.get(entry["memoryIds"][:1], **EVERY)
    assert memory.source.source_path == str(folder / "notes.md")  # the file as dropped
    return entry["memoryIds"][0], "notes.md"  # relative: a name in memory/ingest/


def test_every_forget_selector_through_the_cli_dry_run_equals_the_real_run(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    named = written(settings, orch_id, "The printer is on floor two")
    old = written(settings, orch_id, "The kickoff was in the old office")
    session = written(settings, orch_id, "Prefers dark mode", "--scope", "session",
                      "--session", "s-1")
    project = written(settings, orch_id, "Infra uses Terraform", "--scope", "project",
                      "--project", "p-1")
    tagged = written(settings, orch_id, "Lunch is at noon", "--tag", "trivia")
    said = client.write_back(transcript={"conversationId": "c-1", "messages": [
        {"role": "user", "text": "My name is Imre."}]}).wait(60)["memoryIds"][0]
    ran = client.write_back(workflow_output={"workflowRunId": "r-1", "stepId": "plan",
                                             "output": {"decisions": ["Ship on Monday"]}}
                            ).wait(60)["memoryIds"][0]
    filed, path = _ingested(settings, orch_id, client)
    cutoff = client.get([old], **EVERY)[0].created_at
    # before the second memory's creation: only the first one
    cases = [(["--before", cutoff], {named}), ([old], {old}),
             (["--session", "s-1"], {session}), (["--project", "p-1"], {project}),
             (["--conversation", "c-1"], {said}), (["--run", "r-1"], {ran}),
             (["--file", path], {filed}), (["--tag", "trivia"], {tagged})]
    for args, expected in cases:
        for hard in ([], ["--hard"]):
            dry = cli(settings, "forget", "--orch", orch_id, *args, *hard, "--dry-run")
            real = cli(settings, "forget", "--orch", orch_id, *args, *hard)
            assert set(dry["memoryIds"]) == expected, (args, hard)
            assert (dry["count"], dry["memoryIds"]) == (real["count"], real["memoryIds"]), args
        assert client.get(sorted(expected), **EVERY) == [], args  # the hard pass erased them
    nothing = cli(settings, "forget", "--orch", orch_id, "--session", "s-none")
    assert (nothing["count"], nothing["memoryIds"]) == (0, [])
    bad = cli(settings, "forget", "--orch", orch_id, "--before", "yesterday", code=2)
    assert "before" in bad


def test_retention_forgets_what_is_too_old_once_and_stats_say_so(
        settings: Settings, worker: WorkerProcess, embedder: Embedder, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    source = {"sourceType": "manual", "capturedBy": "user"}
    old = "2020-01-01T00:00:00Z"
    result = client.write_back(memories=[
        {"type": "Observation", "content": "The build was slow that day", "source": source,
         "createdAt": old},
        {"type": "Identity", "content": "My name is Dana", "source": source, "createdAt": old},
        {"type": "Fact", "content": "The sprint ended", "source": source, "createdAt": old,
         "scope": "session", "sessionId": "s-old"},
        {"type": "Observation", "content": "The build is fast today", "source": source},
    ]).wait(60)
    slow, name, sprint, fast = result["memoryIds"]
    dry = cli(settings, "retention", "--orch", orch_id, "--dry-run")
    assert (dry["count"], set(dry["memoryIds"])) == (2, {slow, sprint})
    first = cli(settings, "retention", "--orch", orch_id)
    assert (first["count"], first["soft"], first["hard"]) == (2, 2, 0)
    got = client.get([slow, name, sprint, fast], **EVERY)
    assert {m.memory_id: m.status.value for m in got} == {
        slow: "retracted", name: "active", sprint: "retracted", fast: "active"}
    again = cli(settings, "retention", "--orch", orch_id)
    assert again["count"] == 0
    last = cli(settings, "stats", "--orch", orch_id)["governance"]["lastRetention"]
    assert (last["count"], last["soft"]) == (0, 0)
    runs = [r for r in read_log(client.databases.workspace(orch_id).log_path)
            if r["event"] == "retention"]
    assert [(r["count"], r["dryRun"]) for r in runs] == [(2, True), (2, False), (0, False)]


def test_a_hard_retention_rule_erases(tmp_path: Path, isolated: Any,
                                      embedder: Embedder) -> None:
    settings = isolated(memory={"governance": {"retention": [
        {"type": "Event", "days": 1, "hard": True}]}})
    worker = WorkerProcess(settings).start(None)
    try:
        client = MemoryClient("keeper", settings)
        event = client.write_back(memories=[{
            "type": "Event", "content": "Zanzibar-offsite happened",
            "source": {"sourceType": "manual", "capturedBy": "user"},
            "createdAt": "2020-01-01T00:00:00Z"}]).wait(60)["memoryIds"][0]
        done = cli(settings, "retention", "--orch", "keeper")
        assert (done["count"], done["hard"], done["memoryIds"]) == (1, 1, [event])
        assert client.get([event], **EVERY) == []
    finally:
        worker.stop()
