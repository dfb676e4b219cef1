"""Ingest throughput: a folder of mixed files through one worker's scan.

Drops N files (by default 500: Markdown notes, plain text, JSON records, and about 10%
files that are rejected) into one orchestrator's ingest/ folder, publishes one scan
(follow-up scans take the rest) and prints JSON: files/s and memories/s from publish
to the last file handled, with the outcome counts.

    python benchmarks/ingest_throughput.py --files 500
"""

from __future__ import annotations

import argparse
import json
import random
import time

from _harness import emit, redis_server, settings_for, temp_root, worker_process

from orchmem.models.storage.db.database import Databases
from orchmem.models.storage.db.stats import stats
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish

WORDS = ("apple harbor quartz meadow lantern falcon copper velvet summit prairie orchid "
         "glacier saffron timber ember nectar willow raven marble lagoon").split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.sample(WORDS, 7)).capitalize() + f" ({rng.randint(0, 10**6)})."


def make_file(rng: random.Random, i: int) -> tuple[str, bytes]:
    kind = i % 10
    if kind in (0, 1, 2, 3):
        body = "## Decisions\n" + "".join(f"- {sentence(rng)}\n" for _ in range(3)) + \
               "\n## Todo\n" + "".join(f"- [ ] {sentence(rng)}\n" for _ in range(2)) + \
               "\n" + sentence(rng) + " " + sentence(rng) + "\n"
        return f"note-{i}.md", body.encode()
    if kind in (4, 5, 6):
        return f"text-{i}.txt", "\n\n".join(sentence(rng) for _ in range(4)).encode()
    if kind in (7, 8):
        records = [{"type": rng.choice(["Fact", "Goal", "Preference"]),
                    "content": sentence(rng)} for _ in range(5)]
        return f"records-{i}.json", json.dumps(records).encode()
    return f"broken-{i}.json", b'{"type": "Fact", "content": '


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--root", help="keep the data here (default: a temp folder)")
    args = parser.parse_args()
    rng = random.Random(5)
    with temp_root(args.root) as root, redis_server(root / "redis") as url:
        settings = settings_for(root, url, shards=1,
                                memory={"ingest": {"min_file_age_s": 0}})
        app = create_app(settings)
        orch = "bench-ingest"
        folder = settings.runtime_root(orch) / "memory" / "ingest"
        folder.mkdir(parents=True)
        with worker_process(settings):
            publish(app, WRITEBACK, orch, "wb", {"memories": [{
                "type": "Fact", "content": "warm-up",
                "source": {"sourceType": "manual", "capturedBy": "user"}}]})[1].get(timeout=120)
            for i in range(args.files):
                name, data = make_file(rng, i)
                (folder / name).write_bytes(data)
            started = time.time()
            _, result = publish(app, INGEST_SCAN, orch, "ingest", {"idempotencyKey": "bench"})
            result.get(timeout=3600)
            while any(p.is_file() for p in folder.iterdir()):
                time.sleep(0.05)
            elapsed = time.time() - started
        odb = Databases(settings).open(orch)
        with odb.bound():
            outcomes = dict(odb.db.execute_sql(
                "SELECT outcome, count(*) FROM ingest_manifest GROUP BY outcome").fetchall())
        memories = stats(odb)["memories"] - 1
        emit({"benchmark": "ingest_throughput", "files": args.files,
              "seconds": round(elapsed, 2), "files_per_s": round(args.files / elapsed, 1),
              "memories": memories, "memories_per_s": round(memories / elapsed, 1),
              "outcomes": outcomes})


if __name__ == "__main__":
    main()
