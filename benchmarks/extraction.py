"""Extraction quality: precision and recall per type on a labelled set of transcript lines.

Reads ``tests/data/extraction_labelled.jsonl`` (one ``{"role", "text", "expected"}`` per
line, ``expected`` a memory type or "none"; written by hand, independently of the
rules), runs the extractor on each line as a one-message transcript, and prints JSON:
per-type precision/recall/F1, the memory-or-not decision, and the confusions.

    python benchmarks/extraction.py [--extractor rules | package.module:function]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from _harness import emit

from orchmem.models.extraction import Message, load_extractor

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "extraction_labelled.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--extractor", default="rules")
    args = parser.parse_args()
    extractor = load_extractor(args.extractor)
    rows = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line]
    pairs = []
    for row in rows:
        candidates = extractor([Message(row["role"], row["text"])], "transcript")
        predicted = candidates[0].type.value if candidates else "none"
        pairs.append((row["expected"], predicted, row["text"]))
    types = sorted({e for e, _, _ in pairs} | {p for _, p, _ in pairs})
    per_type = {}
    for label in types:
        tp = sum(1 for e, p, _ in pairs if e == p == label)
        fp = sum(1 for e, p, _ in pairs if p == label and e != label)
        fn = sum(1 for e, p, _ in pairs if e == label and p != label)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_type[label] = {"support": tp + fn, "precision": round(precision, 3),
                           "recall": round(recall, 3), "f1": round(f1, 3)}
    memory_tp = sum(1 for e, p, _ in pairs if e != "none" and p != "none")
    memory_fp = sum(1 for e, p, _ in pairs if e == "none" and p != "none")
    memory_fn = sum(1 for e, p, _ in pairs if e != "none" and p == "none")
    typed = [(e, p) for e, p, _ in pairs if e != "none"]
    emit({
        "benchmark": "extraction",
        "extractor": args.extractor,
        "lines": len(pairs),
        "accuracy": round(sum(1 for e, p, _ in pairs if e == p) / len(pairs), 3),
        "memory_or_not": {
            "precision": round(memory_tp / (memory_tp + memory_fp), 3) if memory_tp else 0.0,
            "recall": round(memory_tp / (memory_tp + memory_fn), 3) if memory_tp else 0.0,
            "assistant_lines_stored": sum(1 for e, p, _ in pairs if p != "none"
                                          and any(r["text"] == _t and r["role"] == "assistant"
                                                  for r in rows for _t in [_])),
        },
        "type_accuracy_when_both_memory": round(
            sum(1 for e, p in typed if e == p) / max(1, sum(1 for _, p in typed if p != "none")),
            3),
        "per_type": per_type,
        "confusions": dict(Counter(f"{e} -> {p}" for e, p, _ in pairs if e != p)
                           .most_common(15)),
        "misses": [t for e, p, t in pairs if e != p][:40],
    })


if __name__ == "__main__":
    main()
