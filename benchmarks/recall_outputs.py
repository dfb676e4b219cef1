"""Recall's whole answers, written to a file, to check that two releases answer alike.

A change meant to make recall cheaper must not change what it returns. This runs the
questions of ``recall_latency.py`` against its databases (``--latency-root``, built
by that benchmark) and LoCoMo's questions against one orchestrator per conversation
(built here on first use under ``--locomo-root``), each with the router on and off,
and writes every bundle (``took_ms`` left out) as one JSON line. Run it once with the
old code (``PYTHONPATH`` pointing at an old release's packages) and once with the new,
then ``--compare`` the two files: every answer must be the same (ids, order, scores,
edges, neighbours, provenance, plan, warnings), a cosine to its last float32 bits
(:data:`COSINE_TOLERANCE`).

    python benchmarks/recall_outputs.py --latency-root /tmp/rl --locomo-root /tmp/lc \
        --out new.jsonl
    python benchmarks/recall_outputs.py --compare old.jsonl new.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from locomo import CATEGORIES, DEFAULT_DATA, load_conversation, session_date
from recall_latency import PEOPLE, QUESTIONS, THINGS

from orchmem.config import load_settings
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases

ROUTES = {"router": True, "hybrid": False}
#: The clock of the generated databases' recalls (recency must not move between runs).
NOW = datetime(2027, 1, 1, tzinfo=UTC)


def _databases(root: str) -> Databases:
    return Databases(load_settings(environ={}, root=root, broker_url="",
                                   embedding={"query_cache_size": 0}))


def latency_cases(root: str, sizes: list[int], queries: int) -> Iterator[dict[str, Any]]:
    """The questions of recall_latency.py against its databases."""
    databases = _databases(root)
    rng = random.Random(7)
    asked = [rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), t=rng.choice(THINGS))
             for _ in range(queries)]
    for size in sizes:
        for query in asked:
            for name, route in ROUTES.items():
                bundle = recall(f"bench-recall-{size}", query, databases=databases, now=NOW,
                                route=route)
                yield {"case": [f"latency-{size}", query, name], "bundle": _dumped(bundle)}


def locomo_cases(root: str, data: str, conversations: int) -> Iterator[dict[str, Any]]:
    """LoCoMo's questions (categories 1-4), one orchestrator per conversation."""
    databases = _databases(root)
    for sample in json.loads(Path(data).read_text())[:conversations]:
        orch = f"locomo-{sample['sample_id']}"
        odb = databases.open(orch)
        if odb.meta("locomo_loaded") is None:  # type: ignore[union-attr]
            load_conversation(odb, sample, get_embedder(databases.settings.embedding))
            with odb.write():  # type: ignore[union-attr]
                from orchmem.models.storage.memories.events import set_meta
                set_meta("locomo_loaded", "1")
        now = _last_session(sample["conversation"]) + timedelta(days=1)
        for qa in sample["qa"]:
            if qa["category"] not in CATEGORIES:
                continue
            for name, route in ROUTES.items():
                bundle = recall(orch, qa["question"], databases=databases, now=now,
                                route=route, top_n=20)
                yield {"case": [orch, qa["question"], name], "bundle": _dumped(bundle)}


def _last_session(conversation: dict[str, Any]) -> datetime:
    return max(session_date(conversation[f"{key}_date_time"])
               for key in conversation if re.fullmatch(r"session_\d+", key))


def _dumped(bundle: Any) -> dict[str, Any]:
    out = bundle.dump()
    out.pop("tookMs", None)
    return out


#: How far a cosine may move: a float32 product over some rows rounds a row's sum
#: differently from one over all of them (the last bit, about 3e-8 at 0.37).
COSINE_TOLERANCE = 1e-6


def compare(old_path: str, new_path: str) -> dict[str, Any]:
    """How many answers are bit-identical, how many differ only by a cosine's last
    bits (``vectorCosine``, within COSINE_TOLERANCE: same ids, order, scores, plan),
    and the first cases that differ beyond that."""
    old = [json.loads(line) for line in Path(old_path).read_text().splitlines()]
    new = [json.loads(line) for line in Path(new_path).read_text().splitlines()]
    pairs = list(zip(old, new, strict=False))
    exact = sum(1 for o, n in pairs if o == n)
    differ = [o["case"] for o, n in pairs
              if o["case"] != n["case"] or not _alike(o["bundle"], n["bundle"])]
    return {"old": len(old), "new": len(new), "bitIdentical": exact,
            "cosineLastBits": len(pairs) - exact - len(differ),
            "alike": len(old) == len(new) and not differ,
            "differing": len(differ) + abs(len(old) - len(new)), "first": differ[:5]}


def _alike(old: Any, new: Any, key: str = "") -> bool:
    """Equal, but for ``vectorCosine`` values within COSINE_TOLERANCE."""
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(_alike(old[k], new[k], k) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(_alike(o, n, key)
                                            for o, n in zip(old, new, strict=True))
    if key == "vectorCosine" and isinstance(old, float) and isinstance(new, float):
        return abs(old - new) <= COSINE_TOLERANCE
    return bool(old == new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency-root", help="recall_latency.py's --root")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--locomo-root", help="LoCoMo's orchestrators (built on first use)")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--conversations", type=int, default=7)
    parser.add_argument("--out", help="the JSON lines file to write")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    args = parser.parse_args()
    if args.compare:
        result = compare(*args.compare)
        print(json.dumps(result, indent=2))
        sys.exit(0 if result["alike"] else 1)
    if not args.out:
        parser.error("--out is required unless --compare")
    with open(args.out, "w", encoding="utf-8") as out:
        if args.latency_root:
            for case in latency_cases(args.latency_root, args.sizes, args.queries):
                out.write(json.dumps(case, sort_keys=True) + "\n")
        if args.locomo_root:
            for case in locomo_cases(args.locomo_root, args.data, args.conversations):
                out.write(json.dumps(case, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
