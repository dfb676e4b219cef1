"""A batch job's messages are acknowledged together after its commit
(``worker.batch_acks``): one transaction removes every message's unacked record, so
none is left for the broker to hand out again, in one HDEL per job, not one per message.
"""

from __future__ import annotations

from typing import Any

import redis
from orchmem_testing import WorkerProcess, distinct_texts

from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
TASKS = 40


def _calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command}") or {}
    return int(stats.get("calls", 0))


def test_a_batch_is_acknowledged_in_one_transaction_after_its_commit(isolated: Any) -> None:
    settings = isolated(shards=1)
    app = create_app(settings)
    client = redis.Redis.from_url(settings.broker_url)
    texts = distinct_texts(TASKS, seed=23)
    results = [publish(app, WRITEBACK, "acked-together", "wb", {"memories": [
        {"type": "Fact", "content": text, "source": MANUAL}]})[1] for text in texts]
    worker = WorkerProcess(settings).start(app)
    try:
        hdel_before = _calls(client, "hdel")
        done = [result.get(timeout=300) for result in results]
        # the acknowledgements follow the results; the stats answer after them
        app.control.inspect(timeout=5).stats()
        hdel_after = _calls(client, "hdel")
        unacked = client.hlen("unacked") + client.zcard("unacked_index")
    finally:
        worker.stop()
    assert all(d["ok"] and not d["duplicate"] for d in done)
    assert unacked == 0
    # the backlog arrives in a few jobs; one HDEL per message would be TASKS or more
    assert 0 < hdel_after - hdel_before < TASKS // 4, (hdel_before, hdel_after)
