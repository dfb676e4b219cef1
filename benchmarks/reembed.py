"""Re-embedding throughput: memories/s moved to the current embedder, in batches.

Stores N short memories without vectors, then runs the re-embed job's batch function
(``models.reembed.reembed_batch``, what the ``reembed`` task loops over) until none is
left, and prints JSON: memories/s per batch size, beside the floor: the model alone
on the same texts in batches of the same size, right after, in this process.

    python benchmarks/reembed.py [--memories 5000] [--batch-sizes 16 64 256]
"""

from __future__ import annotations

import argparse
import os
import random
import time

from _harness import emit, temp_root

from orchmem.config import load_settings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.embedding.reembed import reembed_batch, remaining
from orchmem.models.storage.db.database import Databases
from orchmem.models.writeback.apply import write_memories

WORDS = ("invoice meeting budget launch client server deploy review travel dentist "
         "coffee report partner design backlog hiring roadmap lease flight garden").split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 64, 256])
    args = parser.parse_args()
    rng = random.Random(3)
    results = {}
    with temp_root(None) as root:
        settings = load_settings(environ={}, root=root, broker_url="")
        embedder = get_embedder(settings.embedding)
        for batch_size in args.batch_sizes:
            odb = Databases(settings).open(f"reembed-{batch_size}")
            assert odb is not None
            memories = [validate(MemoryInput, {
                "type": "Fact", "source": {"sourceType": "manual", "capturedBy": "system"},
                "content": f"{' '.join(rng.sample(WORDS, 6))} #{i}"})
                for i in range(args.memories)]
            for start in range(0, len(memories), 1000):
                write_memories(odb, key=f"load-{start}", task="bench",
                               memories=memories[start:start + 1000])
            started = time.perf_counter()
            done = 0
            while True:
                moved = reembed_batch(odb, embedder, batch_size)
                if not moved:
                    break
                done += moved
            elapsed = time.perf_counter() - started
            assert remaining(odb, embedder.version) == 0
            texts = [m.content for m in memories]
            started = time.perf_counter()
            for start in range(0, len(texts), batch_size):
                embedder.encode(texts[start:start + batch_size])
            floor = len(texts) / (time.perf_counter() - started)
            results[str(batch_size)] = {"memories": done, "seconds": round(elapsed, 2),
                                        "memories_per_s": round(done / elapsed, 1),
                                        "embedder_texts_per_s": round(floor, 1),
                                        "of_floor": round(done / elapsed / floor, 3)}
    emit({"benchmark": "reembed", "embedder": embedder.version,
          "load_avg_1m": round(os.getloadavg()[0], 2), "results": results})


if __name__ == "__main__":
    main()
