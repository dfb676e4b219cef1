"""A hard forget erases a memory's words from the execution log and the episodes
too, in the client's in-process mode (the real task code and SQLite file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from orchmem_testing import make_settings
from orchmem_testing import open_odb as odb_of

from orchmem.models.execlog.episodes import similar_episodes
from orchmem.models.storage.execlog.entries import read_log
from orchmem.models.storage.visibility import View
from orchmem.worker import MemoryClient
from orchmem.worker.cli import main

ORCH = "forget-log-bot"
WORD = "quokkaberry"
C7 = View(session_id="c-7")


@pytest.fixture
def memory(tmp_path: Path) -> MemoryClient:
    return MemoryClient(ORCH, make_settings(tmp_path / "root", ""), immediate=True)


def logged_run(memory: MemoryClient, conversation_id: str = "c-7",
               suffix: str = "") -> tuple[Any, str]:
    """A run whose step prompts, answers and writes a memory with WORD, and whose
    outcome (another step's text, not cited) says WORD too; returns (run, memoryId)."""
    with memory.run("bake for the launch", conversation_id=conversation_id) as run:
        with run.step("decide") as step:
            step.prompt(f"Which {WORD} pastries do we bake?", actor="planner")
            step.response(f"We bake {WORD} pastries for the launch.", actor="planner")
            done = step.write_back(memories=[{
                "type": "Decision",
                "content": f"We bake {WORD} pastries for the launch{suffix}"}]
            ).wait(30)
            assert done is not None and done["ok"], done
        run.outcome("ok", f"The {WORD} pastries are baked.")
    return run, done["memoryIds"][0]


def quoting_run(memory: MemoryClient) -> Any:
    """Another run that quotes the memory's words and wrote no memory."""
    with memory.run("bake for the launch", conversation_id="c-8") as run, \
            run.step("ask") as step:
        step.prompt(f"Which {WORD} pastries do we bake?", actor="planner")
    return run


def all_log_text(memory: MemoryClient) -> str:
    events, _ = read_log(odb_of(memory), limit=1000)
    return repr(events)


def test_a_hard_forget_redacts_the_cited_log_texts_and_rewrites_the_episode(
        memory: MemoryClient) -> None:
    run, memory_id = logged_run(memory)
    other = quoting_run(memory)  # its episode quotes the memory: rewritten too
    [episode] = [e for e in similar_episodes(odb_of(memory), WORD, 5, C7)
                 if e["runId"] == run.run_id]
    assert WORD in episode["summary"] and WORD in all_log_text(memory)

    done = memory.forget(memory_id, hard=True, reason="asked").wait(30)
    assert done is not None and done["ok"], done
    assert done["erased"]["logEvents"] == 2 and done["erased"]["episodes"] == 2

    events, _ = read_log(odb_of(memory), run_id=run.run_id)
    decided = [e for e in events if e.get("stepId") == "decide"]
    texts = {e["kind"]: e for e in decided}
    for kind in ("prompt", "response"):
        assert "text" not in texts[kind] and len(texts[kind]["digest"]) == 64
        assert texts[kind]["redacted"]["by"] == "forget_hard"
        assert texts[kind]["eventId"] and texts[kind]["at"]
    assert "redacted" not in texts["step_start"]
    assert similar_episodes(odb_of(memory), WORD, 5, C7) == []
    rewritten = [e for e in similar_episodes(odb_of(memory), "launch outcome", 5, C7)
                 if e["runId"] == run.run_id]
    assert rewritten and WORD not in rewritten[0]["summary"]
    assert WORD not in rewritten[0]["title"]
    # the uncited outcome keeps its text in the log; the episode no longer quotes it
    outcome = [e for e in events if e["kind"] == "outcome"]
    assert outcome[0]["text"] == f"The {WORD} pastries are baked."
    assert memory.recall(WORD, episodes=True, session_id="c-7").episodes == []
    [(title, summary)] = odb_of(memory).sql(
        "SELECT title, summary FROM episodes WHERE run_id = ?", (other.run_id,))
    assert (title, summary.split(" Steps:")[0]) == ("[…] for the […]", "Which […] […] do we […]?")


def test_a_hard_forget_where_by_run_erases_every_text_of_that_run(
        memory: MemoryClient) -> None:
    run, _ = logged_run(memory)
    kept, _ = logged_run(memory, "c-9", " (and for the fair)")
    done = memory.forget_where(workflow_run_id=run.run_id, hard=True).wait(30)
    assert done is not None and done["ok"] and done["count"] == 1, done
    events, _ = read_log(odb_of(memory), run_id=run.run_id)
    assert [e for e in events if "text" in e] == []
    assert done["erased"]["logEvents"] == 3  # prompt and response (cited), outcome
    assert {e["data"]["conversationId"] for e in events if e["kind"] == "run_start"} == \
        {"c-7"}  # where the run belongs stays
    others, _ = read_log(odb_of(memory), run_id=kept.run_id)
    assert [e["kind"] for e in others if "text" in e] == ["prompt", "response", "outcome"]
    shown = CliRunner().invoke(main, ["--root", str(memory.settings.root), "log", "--orch",
                                      ORCH, "--run", run.run_id])
    assert shown.exit_code == 0, shown.output
    assert WORD not in shown.output
    assert [line.split()[4] for line in shown.output.splitlines() if "[redacted]" in line] \
        == ["prompt", "response", "outcome"]


def test_a_hard_forget_where_by_conversation_erases_its_runs_texts_matched_or_not(
        memory: MemoryClient) -> None:
    with memory.run("small talk", conversation_id="c-10") as run:
        run.outcome("ok", f"Nothing decided about {WORD}.")
    done = memory.forget_where(conversation_id="c-10", hard=True).wait(30)
    assert done is not None and done["ok"] and done["count"] == 0, done
    assert done["erased"]["logEvents"] == 1 and done["erased"]["episodes"] == 1
    assert WORD not in all_log_text(memory)
    assert similar_episodes(odb_of(memory), WORD, 5, View(session_id="c-10")) == []
    dry = memory.forget_where(conversation_id="c-10", hard=True, dry_run=True).wait(30)
    assert dry is not None and "erased" not in dry


def test_a_soft_forget_leaves_the_log_alone(memory: MemoryClient) -> None:
    _, memory_id = logged_run(memory)
    before = all_log_text(memory)
    assert memory.forget(memory_id).wait(30)["ok"]
    assert all_log_text(memory) == before
