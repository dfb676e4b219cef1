"""A hard forget leaves the forgotten memory's words nowhere: not in any file under the
runtime root (database with its execution log and episodes, WAL, outbox, logs,
bulletins, ingest folders, the broker's own folder and its append-only file) and not in
any key of the broker's Redis."""

from __future__ import annotations

from pathlib import Path

from forget_search import files_with, keys_with, wait_for_aof_rewrite
from orchmem_testing import RedisServer, WorkerProcess, make_settings

from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.delivery.deadletters import dead_letter
from orchmem.models.storage.visibility import EVERYTHING
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.runtime.app import create_app

WORD = b"zanzibarquux"
TIMEOUT = 60


def test_a_hard_forget_leaves_the_word_in_no_file_and_no_broker_key(tmp_path: Path) -> None:
    root = tmp_path / "root"
    # Plain commands in the rewritten AOF (no RDB preamble, which may compress values),
    # so a byte search sees every word the file keeps.
    server = RedisServer(root / "broker", appendonly=True,
                         extra_args=["--aof-use-rdb-preamble", "no"]).start()
    settings = make_settings(root, f"{server.url}/0", shards=1,
                             memory={"ingest": {"min_file_age_s": 0}})
    app = create_app(settings)
    worker = WorkerProcess(settings).start(app)
    try:
        client = MemoryClient("forgetful", settings, app=app)
        said = client.write_back(transcript={"conversationId": "c1", "messages": [
            {"role": "user", "text": "I like zanzibarquux pastries."}]}).wait(TIMEOUT)
        assert said is not None and said["ok"], said
        ingest = settings.runtime_root("forgetful") / "memory" / "ingest"
        (ingest / "notes.md").write_text("# Notes\n\nWe decided to bake zanzibarquux "
                                         "pastries for the launch.\n")
        scanned = client.ingest_now().wait(TIMEOUT)
        assert scanned is not None and scanned["ok"], scanned
        # the same words in the log's texts of the step that wrote the memory
        with client.run("bake for the launch") as run, run.step("decide") as step:
            step.prompt("Which zanzibarquux pastries do we bake?", actor="planner")
            step.response("Zanzibarquux tarts, for the launch.", actor="planner")
            stepped = step.write_back(memories=[{
                "type": "Decision", "content": "We bake zanzibarquux tarts"}]).wait(TIMEOUT)
            assert stepped is not None and stepped["ok"], stepped
        assert all(r is not None and r["ok"] for r in run.wait(TIMEOUT))
        assert "zanzibarquux" in client.bulletin(timeout=TIMEOUT).text
        ids = [*said["created"], *(i for f in scanned["files"] for i in f["memoryIds"]),
               *stepped["memoryIds"]]
        memories = [m for m in client.get(ids, view=EVERYTHING, purpose="test oracle")
                    if "zanzibarquux" in m.content]
        assert len(memories) == 3
        odb = Databases(settings).open("forgetful")
        assert odb is not None
        with odb.read():  # the episode's summary quotes the step's prompt
            assert "zanzibarquux" in odb.sql("SELECT summary FROM episodes")[0][0]
        dead_letter(odb, "wb-parked", WRITEBACK, {"payload": {"memories": [
            {"content": memories[0].content}]}}, 4, "crashed its worker")
        assert files_with(root, WORD) and keys_with(server.client(), WORD)

        erased = []
        for memory in memories:
            done = client.forget(memory.memory_id, hard=True, reason="asked").wait(TIMEOUT)
            assert done is not None and done["ok"], done
            erased.append(done.get("erased", {}))
        wait_for_aof_rewrite(server.client())

        assert (files_with(root, WORD), keys_with(server.client(), WORD)) == ([], [])
        assert [e["aofRewrite"] for e in erased] == ["requested"] * 3
        assert sum(e["deadLetters"] for e in erased) == 1
        assert sum(len(e["files"]) for e in erased) == 1
        assert sum(e["logEvents"] for e in erased) == 2
        assert erased[-1]["bulletin"] == "rebuilt"
    finally:
        worker.stop()
        server.stop()
