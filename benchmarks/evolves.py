"""Evolves proposals: precision and recall of replaces/challenges on a labelled set.

Reads ``tests/data/evolves_labelled.jsonl`` (one ``{"type", "older", "newer", "label"}``
per line, ``label`` one of replaces, challenges, refines, none; written by hand, as a
reviewer would judge the pair, independently of the rules). Each pair is embedded with
the configured model, given the extractor's slot and value (as write-back stores them,
captured by the extractor: not stated by the user), and put through
``models.evolves.relation_of``. Prints JSON:

- ``supersede``: precision/recall of proposing replaces-or-challenges (what an accepted
  proposal supersedes) against pairs labelled replaces or challenges;
- ``relations``: precision/recall per relation (exact);
- ``acceptable``: the share of proposals a reviewer would accept (a replaces/challenges
  proposal on a pair labelled either, a refines proposal on a pair labelled refines);
- ``confusions``: (label, proposed) counts.

    python benchmarks/evolves.py
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import numpy as np
from _harness import emit

from orchmem.config import load_settings
from orchmem.models.core.shapes import MemoryType, content_fingerprint
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.reflection.evolves import RELATIONS, relation_of
from orchmem.models.storage.reflection.units import StoredUnit
from orchmem.models.writeback.extraction import subject_of

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "evolves_labelled.jsonl"
SUPERSEDE = {"replaces", "challenges"}


def unit(memory_id: str, memory_type: str, content: str, at: str) -> StoredUnit:
    subject, value = subject_of(MemoryType(memory_type), content)
    return StoredUnit(row_id=0, memory_id=memory_id, type=memory_type, content=content,
                      summary=content, importance=50, confidence=0.8, subject=subject,
                      value=value, stated=False, reinforcements=0,
                      fingerprint=content_fingerprint(memory_type, content), created_at=at,
                      topic=None)


def rate(hit: int, total: int) -> float | None:
    return round(hit / total, 3) if total else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DATA))
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line]
    embedder = get_embedder(load_settings(environ={}).embedding)
    olds = embedder.encode([r["older"] for r in rows])
    news = embedder.encode([r["newer"] for r in rows])
    pairs = []
    for i, row in enumerate(rows):
        older = unit("old", row["type"], row["older"], "2026-01-01T00:00:00Z")
        newer = unit("new", row["type"], row["newer"], "2026-02-01T00:00:00Z")
        found = relation_of(newer, older, float(np.dot(olds[i], news[i])))
        pairs.append((row["label"], found[0] if found else "none"))
    proposed = [(label, got) for label, got in pairs if got != "none"]
    sup_tp = sum(1 for label, got in pairs if got in SUPERSEDE and label in SUPERSEDE)
    sup_pred = sum(1 for _, got in pairs if got in SUPERSEDE)
    sup_gold = sum(1 for label, _ in pairs if label in SUPERSEDE)
    acceptable = sum(1 for label, got in proposed
                     if (got in SUPERSEDE and label in SUPERSEDE) or got == label == "refines")
    emit({
        "pairs": len(pairs), "proposals": len(proposed),
        "supersede": {"precision": rate(sup_tp, sup_pred), "recall": rate(sup_tp, sup_gold),
                      "proposed": sup_pred, "labelled": sup_gold},
        "relations": {r: {"precision": rate(sum(1 for lb, g in pairs if g == lb == r),
                                            sum(1 for _, g in pairs if g == r)),
                          "recall": rate(sum(1 for lb, g in pairs if g == lb == r),
                                         sum(1 for lb, _ in pairs if lb == r))}
                      for r in RELATIONS},
        "acceptable": rate(acceptable, len(proposed)),
        "confusions": {f"{label}->{got}": n for (label, got), n in
                       sorted(Counter(pairs).items()) if label != got},
    })


if __name__ == "__main__":
    main()
