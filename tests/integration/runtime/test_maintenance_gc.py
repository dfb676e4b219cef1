"""The beat's ``gc`` job on a real file, in immediate mode (the task runs in-process)."""

from __future__ import annotations

from pathlib import Path

from orchmem_testing import make_settings

from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.search.fts import merge_segments
from orchmem.tasks.maintenance import GC
from orchmem.worker import MemoryClient
from orchmem.worker.runtime.publish import publish

ORCH = "gc-orch"


def _segments(databases: Databases) -> int:
    odb = databases.open(ORCH, create=False)
    assert odb is not None
    with odb.read():
        return int(odb.sql("SELECT count(DISTINCT segid) FROM memory_fts_idx")[0][0])


def test_gc_merges_the_full_text_index_and_search_still_finds_everything(tmp_path: Path
                                                                         ) -> None:
    settings = make_settings(tmp_path / "root", "")
    memory = MemoryClient(ORCH, settings, immediate=True)
    animals = ["otter", "heron", "badger", "lynx", "marten", "stoat", "vole", "wren"]
    for animal in animals:  # one commit each: one full-text segment each
        assert memory.write_back(memories=[{"type": "Fact", "content":
                                            f"The {animal} was seen by the river"}]).ok
    databases = Databases(settings)
    before = _segments(databases)
    assert before > 1
    _, result = publish(memory.app, GC, ORCH, "gc", {})
    answer = result.get()
    assert answer["ok"] and answer["textSegmentsMerged"] == before
    assert _segments(databases) == 1
    for animal in animals:
        found = memory.recall(f"{animal} river", top_n=3)
        assert animal in found.nodes[0].memory.content
    odb = databases.open(ORCH, create=False)
    assert odb is not None and merge_segments(odb) == 1  # nothing left to merge
