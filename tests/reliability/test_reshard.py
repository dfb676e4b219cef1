"""Changing ``shards`` strands nothing: queued messages are forwarded, never refused or lost.

Messages published under the old shard count wait in the old queues; the workers of
the new count find them on what is no longer their orchestrator's queue and forward
them (same task id) instead of refusing them as misrouted. Lowering the count leaves
queues no worker reads: ``orchmem drain-queues`` moves them where they are forwarded.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from orchmem_testing import WorkerProcess, distinct_texts, unique_id

from orchmem.config import Settings
from orchmem.models.workspace.memlog import read_log
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.drain import drain
from orchmem.worker.runtime.publish import publish
from orchmem.worker.runtime.shards import shard_for

MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def _ids(old: Settings, new: Settings, moved: int, kept: int) -> list[str]:
    """``moved`` orchestrators whose shard changes between the two counts, ``kept`` not."""
    chosen: list[str] = []
    need = {True: moved, False: kept}
    while any(need.values()):
        candidate = unique_id("reshard")
        changes = shard_for(old, candidate) != shard_for(new, candidate)
        if need[changes]:
            need[changes] -= 1
            chosen.append(candidate)
    return chosen


def _write(app: Any, orchestrator_id: str, text: str) -> Any:
    return publish(app, WRITEBACK, orchestrator_id, "wb", {"memories": [
        {"type": "Fact", "content": text, "source": MANUAL}]})[1]


def _contents(settings: Settings, orchestrator_id: str) -> list[str]:
    db = Path(settings.runtime_root(orchestrator_id)) / "memory" / "memory.db"
    conn = sqlite3.connect(db, timeout=10)
    try:
        return sorted(r[0] for r in conn.execute("SELECT content FROM memories"))
    finally:
        conn.close()


def test_raising_shards_from_2_to_3_under_load_forwards_every_queued_message(
        isolated: Any) -> None:
    old = isolated(shards=2)
    new = old.model_copy(update={"shards": 3})
    orchestrators = _ids(old, new, moved=3, kept=2)
    # Texts far apart, so that no write reinforces another instead of creating one.
    texts = iter(distinct_texts(30 * len(orchestrators), seed=23))
    written: dict[str, list[str]] = {o: [] for o in orchestrators}

    def write(app: Any, o: str) -> Any:
        written[o].append(next(texts))
        return _write(app, o, written[o][-1])

    before = create_app(old)
    results = [write(before, o) for _ in range(20) for o in orchestrators]
    after = create_app(new)
    worker = WorkerProcess(new).start(after)
    try:
        results += [write(after, o) for _ in range(10) for o in orchestrators]
        outcomes = [r.get(timeout=600) for r in results]
    finally:
        worker.stop()
    assert all(o["ok"] and not o.get("duplicate") for o in outcomes)
    for o in orchestrators:
        assert _contents(new, o) == sorted(written[o])
    forwarded = [r for r in read_log(new.logs_dir / "routing.log") if r["event"] == "forwarded"]
    moved = {o for o in orchestrators if shard_for(old, o) != shard_for(new, o)}
    assert len(forwarded) == 20 * len(moved)
    assert {r["orchestratorId"] for r in forwarded} == moved
    denials = new.logs_dir / "scope-denials.log"
    assert not denials.exists() or read_log(denials) == []


def test_lowering_shards_then_draining_the_old_queues_applies_everything_once(
        isolated: Any) -> None:
    old = isolated(shards=3)
    new = old.model_copy(update={"shards": 2})
    stranded = next(o for o in (unique_id("drain") for _ in range(200))
                    if shard_for(old, o) == 2)
    before = create_app(old)
    texts = distinct_texts(15, seed=29)
    results = [_write(before, stranded, text) for text in texts]
    after = create_app(new)
    worker = WorkerProcess(new).start(after)
    try:
        moved = drain(new, new.broker_url)
        outcomes = [r.get(timeout=600) for r in results]
    finally:
        worker.stop()
    assert moved == {"memory.2": 15}
    assert all(o["ok"] for o in outcomes)
    assert _contents(new, stranded) == sorted(texts)
    assert drain(new, new.broker_url) == {}
