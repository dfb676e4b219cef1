"""A hard forget (by id or by policy) reaches everything derived from the memory: after
reflection (topics, a crystal, a conflict insight, working.md), an execution-log run
with its episode, the bulletin and a prompt built with working memory, no file under
the runtime root and no key of the broker holds the memory's word, and the next prompt
built with working memory does not show it, before any reflection runs again.

An export taken before the forget is the operator's copy: it keeps the word (README,
"What a hard forget erases")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from forget_search import files_with, keys_with, wait_for_aof_rewrite
from orchmem_testing import RedisServer, WorkerProcess, free_port, make_settings

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.governance import derived
from orchmem.models.portability.export import export_jsonl
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import create_app

WORD = "quokkablimp"
TIMEOUT = 120
TEA = [f"The user likes {WORD} green tea in the morning",
       f"The user drinks {WORD} green tea every morning",
       f"Green {WORD} tea with honey is the user's favourite morning drink"]
HOMES = [("I live in Lisbon", "2026-01-01T00:00:00Z"),
         (f"I live in {WORD.capitalize()}", "2026-02-01T00:00:00Z")]


def memory(content: str, memory_type: str, at: str) -> dict[str, Any]:
    return {"type": memory_type, "content": content, "importance": 60, "confidence": 0.8,
            "createdAt": at, "source": {"sourceType": "manual", "capturedBy": "extractor"}}


def ok(handle: Any) -> dict[str, Any]:
    done = handle.wait(TIMEOUT)
    assert done is not None and done["ok"], done
    return dict(done)


def derive_everything(client: MemoryClient, tmp_path: Path) -> list[str]:
    """Write the memories, log a run citing one, reflect, build the bulletin, a prompt
    with working memory and an export. Returns the ids of the memories holding the word."""
    written = ok(client.write_back(memories=[
        *(memory(t, "Preference", f"2026-01-0{i + 1}T00:00:00Z") for i, t in enumerate(TEA)),
        *(memory(t, "Identity", at) for t, at in HOMES)]))
    with client.run("pick the tea") as run, run.step("choose") as step:
        step.prompt(f"Which {WORD} tea does the user want?", actor="planner")
        step.response(f"The {WORD} oolong, every afternoon.", actor="planner")
        # no source of its own: the step's (run and step) is its provenance
        stepped = ok(step.write_back(memories=[{
            "type": "Preference", "content": f"The user wants {WORD} oolong in the afternoon"}]))
    assert all(r is not None and r["ok"] for r in run.wait(TIMEOUT))
    ok(client.reflect())
    odb = client.databases.open(client.orchestrator_id)
    assert odb is not None
    with odb.read():
        counts = odb.sql("SELECT (SELECT count(*) FROM crystals), (SELECT count(*) FROM "
                         "insights WHERE status = 'open'), (SELECT count(*) FROM "
                         "memory_topics), (SELECT count(*) FROM episodes)")[0]
        crystal = odb.sql("SELECT m.content FROM crystals c JOIN memories m "
                          "ON m.memory_id = c.memory_id")
    assert all(counts), counts  # a crystal, an insight, topics, an episode
    assert WORD in crystal[0][0].casefold()
    assert WORD in client.bulletin(timeout=TIMEOUT).text.casefold()
    prompt = client.context_for("step", "which tea in the morning?", working=True).text
    assert "[working memory]" in prompt and WORD in prompt.casefold()
    with odb.read():
        export_jsonl(odb, tmp_path / "exported")  # the operator's copy, outside the root
    ids = [i for i in [*written["memoryIds"], *stepped["memoryIds"]]
           if WORD in next(m.content for m in client.get([i])).casefold()]
    assert len(ids) == 5
    return ids


def forget(client: MemoryClient, ids: list[str], how: str) -> list[dict[str, Any]]:
    if how == "by id":
        return [ok(client.forget(i, hard=True, reason="asked"))["erased"] for i in ids]
    done = ok(client.forget_where(ids, hard=True, reason="asked"))
    assert done["count"] == len(ids)
    return [done["erased"]]


def assert_forgotten(client: MemoryClient, root: Path, erased: list[dict[str, Any]]) -> None:
    prompt = client.context_for("step", "which tea in the morning?", working=True).text
    assert "[working memory]" in prompt and WORD not in prompt.casefold()
    assert WORD not in (client.working_memory() or WORD)
    assert files_with(root, WORD.encode()) == []
    assert erased[-1]["working"] == "rebuilt" and erased[-1]["bulletin"] == "rebuilt"
    bulletins = client.databases.workspace(client.orchestrator_id).bulletins_dir
    named = {p for e in derived.REGISTRY for p in e.where}
    left = {f"bulletins/{p.name}" for p in bulletins.iterdir()
            if not p.name.endswith(".lock")}
    assert left and left <= named  # every file written there has its registry entry


def settings_for(root: Path, url: str) -> Settings:
    return make_settings(root, url, shards=1)


@pytest.mark.parametrize("how", ["by id", "by policy"])
def test_a_hard_forget_through_the_worker_reaches_every_derived_artifact(
        tmp_path: Path, how: str) -> None:
    root = tmp_path / "root"
    server = RedisServer(root / "broker", appendonly=True,
                         extra_args=["--aof-use-rdb-preamble", "no"]).start()
    settings = settings_for(root, f"{server.url}/0")
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        client = MemoryClient("derived", settings, app=app)
        ids = derive_everything(client, tmp_path)
        assert files_with(root, WORD.encode()) and keys_with(server.client(), WORD.encode())

        erased = forget(client, ids, how)
        wait_for_aof_rewrite(server.client())

        assert_forgotten(client, root, erased)
        assert keys_with(server.client(), WORD.encode()) == []
        assert all(e["aofRewrite"] == "requested" for e in erased)
        assert sum(e["logEvents"] for e in erased) == 2  # the step's prompt and response
        # the export taken before is the operator's: it keeps the word
        assert files_with(tmp_path / "exported", WORD.encode())
    finally:
        worker.stop()
        server.stop()


@pytest.mark.parametrize("how", ["by id", "by policy"])
def test_a_hard_forget_in_process_reaches_every_derived_artifact(
        tmp_path: Path, embedder: Embedder, how: str) -> None:
    root = tmp_path / "root"
    settings = settings_for(root, f"redis://127.0.0.1:{free_port()}/0")
    client = MemoryClient("derived", settings, immediate=True)
    ids = derive_everything(client, tmp_path)
    assert files_with(root, WORD.encode())

    erased = forget(client, ids, how)

    assert_forgotten(client, root, erased)
    assert all(e["aofRewrite"] == "no broker (immediate mode)" for e in erased)
    assert sum(e["logEvents"] for e in erased) == 2 and sum(e["episodes"] for e in erased)
    client.close()
