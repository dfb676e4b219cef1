"""What query expansion from open insights costs a recall (models/recall/expansion.py):
the same LoCoMo questions recalled with ``memory.retrieval.insight_terms`` 0 and 6,
alternating question by question, on orchestrators built by recall_outputs.py
(``--locomo-root``). Prints JSON: the median and p95 milliseconds of each, and how
many answers differed (none may, while no insight is open).

    python benchmarks/insight_expansion.py --locomo-root /tmp/lc --conversations 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from locomo import CATEGORIES, DEFAULT_DATA
from recall_outputs import _databases, _last_session

from orchmem.config.memory_settings import RetrievalSettings
from orchmem.models.recall.search import recall


def _p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--locomo-root", required=True)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--conversations", type=int, default=2)
    args = parser.parse_args()
    databases = _databases(args.locomo_root)
    took: dict[int, list[float]] = {0: [], 6: []}
    differing = 0
    for sample in json.loads(Path(args.data).read_text())[:args.conversations]:
        orch = f"locomo-{sample['sample_id']}"
        odb = databases.open(orch, create=False)
        assert odb is not None, f"build {orch} with recall_outputs.py first"
        now = _last_session(sample["conversation"]) + timedelta(days=1)
        base = odb.memory.retrieval
        for position, qa in enumerate(q for q in sample["qa"] if q["category"] in CATEGORIES):
            answers: dict[int, Any] = {}
            order = (0, 6) if position % 2 == 0 else (6, 0)
            for terms in order:
                params = RetrievalSettings(**{**base.model_dump(), "insight_terms": terms})
                started = time.perf_counter()
                bundle = recall(orch, qa["question"], databases=databases, now=now,
                                params=params, top_n=20)
                took[terms].append((time.perf_counter() - started) * 1000)
                answers[terms] = (bundle.memory_ids, bundle.plan)
            differing += answers[0] != answers[6]
    print(json.dumps({str(k): {"recalls": len(v), "medianMs": round(statistics.median(v), 3),
                               "p95Ms": round(_p95(v), 3)} for k, v in took.items()}
                     | {"differing": differing}, indent=2))


if __name__ == "__main__":
    main()
