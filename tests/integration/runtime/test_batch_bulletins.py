"""Bulletins waiting in a shard worker's gate run together, after the commit of the
write-backs before them (``worker.batching``), and each still reflects exactly its own
orchestrator's writes published before it.

A backlog is queued before the worker starts: for several orchestrators, rounds of
(write-back, bulletin). Run one pool job per bulletin (as before), the worker would
need at least one job per bulletin; grouped, a round of every orchestrator is one job.
The number of jobs is the pool's own count (``inspect().stats()``, ``pool.writes``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchmem_testing import WorkerProcess, distinct_texts, make_settings

from orchmem.models.core.shapes import format_ts
from orchmem.models.storage.db.database import Databases
from orchmem.tasks.bulletin import BULLETIN, snapshots_later, write_bulletin
from orchmem.tasks.publish import envelope, send_envelope
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import OrchmemCelery, create_app
from orchmem.worker.runtime.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
ORCHESTRATORS = [f"grouped-{n}" for n in range(6)]
ROUNDS = 4


def _cited(bulletin: dict[str, Any]) -> set[str]:
    return {memory_id for lines in bulletin["sections"].values() for line in lines
            for memory_id in line["memoryIds"]}


def _pool_jobs(app: OrchmemCelery, worker: WorkerProcess) -> int:
    stats = app.control.inspect(timeout=5).stats() or {}
    for name, reply in stats.items():
        if name.startswith(worker.hostname_prefix):
            return int(reply["pool"]["writes"]["total"])
    raise AssertionError(f"no stats from the worker: {stats}")


def test_waiting_bulletins_run_in_the_job_of_the_writes_before_them(isolated: Any) -> None:
    settings = isolated(shards=1)
    app = create_app(settings)
    texts = iter(distinct_texts(len(ORCHESTRATORS) * ROUNDS, seed=22))
    writes, bulletins = {}, {}
    for round_ in range(ROUNDS):
        for orch in ORCHESTRATORS:
            writes[orch, round_] = publish(app, WRITEBACK, orch, "wb", {"memories": [
                {"type": "Goal", "content": f"Ship {next(texts)}", "source": MANUAL}]})[1]
            bulletins[orch, round_] = send_envelope(app, envelope(
                orch, BULLETIN, "bulletin", {"idempotencyKey": f"b-{orch}-{round_}"}),
                expires_s=600)
    worker = WorkerProcess(settings).start(app)
    try:
        written = {at: result.get(timeout=300)["memoryIds"] for at, result in writes.items()}
        built = {at: result.get(timeout=300) for at, result in bulletins.items()}
        jobs = _pool_jobs(app, worker)
    finally:
        worker.stop()
    for (orch, round_), bulletin in built.items():
        assert bulletin["ok"], bulletin
        before = {i for r in range(round_ + 1) for i in written[orch, r]}
        after = {i for r in range(round_ + 1, ROUNDS) for i in written[orch, r]}
        # Every write published before the bulletin, none published after it.
        assert before <= _cited(bulletin), (orch, round_)
        assert not after & _cited(bulletin), (orch, round_)
    # An orchestrator's write-backs and its bulletin in one job have their results
    # stored together, once the bulletin is built (before: the write-backs' first, in a
    # store of their own the bulletin waited for).
    together = [at for at, result in writes.items()
                if _stored_at(result) > built[at]["generatedAt"]]
    assert together, "every write-back's result was stored before its bulletin was built"
    # One job per bulletin would be 24 jobs for the bulletins alone (and more for the
    # write-backs and the start's control tasks).
    assert jobs < len(bulletins), f"{jobs} pool jobs for {len(bulletins)} bulletins"
    # A bulletin waits for no other orchestrator's write-back published after it: in the
    # first round none is ever in an earlier job, and in the same job each orchestrator's
    # bulletin is built right after its own commit, before the next one's write-backs.
    committed = _committed_at(settings, {i: orch for (orch, round_), ids in written.items()
                                         if round_ == 0 for i in ids})
    for position, orch in enumerate(ORCHESTRATORS):
        built_at = built[orch, 0]["generatedAt"]
        later = [committed[i] for o in ORCHESTRATORS[position + 1:] for i in written[o, 0]]
        assert all(built_at < at for at in later), (orch, built_at, min(later, default=None))


def _stored_at(result: Any) -> str:
    """When a result was stored (Celery's ``date_done``), as the bulletin writes times."""
    done = result.date_done
    if isinstance(done, str):
        done = datetime.fromisoformat(done)
    return format_ts(done if done.tzinfo else done.replace(tzinfo=UTC))


def test_a_jobs_bulletin_snapshots_are_written_at_its_end(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "")
    odb = Databases(settings).open("snapshots-later")
    assert odb is not None
    latest = odb.workspace.bulletins_dir / "latest.json"
    with snapshots_later():
        first = write_bulletin(odb, durable=False)
        assert not latest.exists()  # left to the block's end
        last = write_bulletin(odb, durable=False)
        assert not latest.exists()
    written = json.loads(latest.read_text("utf-8"))
    assert written["generatedAt"] == last["generatedAt"] != first["generatedAt"]
    assert (latest.parent / "latest.md").read_text("utf-8").count(last["generatedAt"]) == 1
    # A durable write (a hard forget's rebuild) does not wait.
    latest.unlink()
    with snapshots_later():
        rebuilt = write_bulletin(odb)
        assert json.loads(latest.read_text("utf-8"))["generatedAt"] == rebuilt["generatedAt"]


def _committed_at(settings: Any, owners: dict[str, str]) -> dict[str, str]:
    """memoryId -> the time its write-back's transaction wrote it (``updated_at``;
    ``created_at`` is when it was said)."""
    found = {}
    for orch in set(owners.values()):
        odb = Databases(settings).open(orch)
        found.update(odb.sql("SELECT memory_id, updated_at FROM memories"))
    return {memory_id: found[memory_id] for memory_id in owners}
