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

from orchmem.models.writeback.extraction import Message, load_extractor

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "extraction_labelled.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--extractor", default="rules")
    args = parser.parse_args()
    extractor = load_extractor(args.extractor)
    rows = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line]
    # Each line is labelled with one type (or "none"). Every candidate the extractor
    # returns counts: the one matching the label is a true positive, any other is a
    # false positive of its type, so splitting a line into extra memories costs precision.
    scored = []
    for row in rows:
        candidates = extractor([Message(row["role"], row["text"])], "transcript")
        scored.append((row, [c.type.value for c in candidates]))
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for row, predicted in scored:
        expected = row["expected"]
        if expected != "none" and expected in predicted:
            tp[expected] += 1
            predicted = list(predicted)
            predicted.remove(expected)
        elif expected != "none":
            fn[expected] += 1
        for label in predicted:
            fp[label] += 1
    per_type = {}
    for label in sorted({*tp, *fp, *fn}):
        precision = tp[label] / (tp[label] + fp[label]) if tp[label] + fp[label] else 0.0
        recall = tp[label] / (tp[label] + fn[label]) if tp[label] + fn[label] else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_type[label] = {"support": tp[label] + fn[label], "precision": round(precision, 3),
                           "recall": round(recall, 3), "f1": round(f1, 3)}
    first = [(row["expected"], predicted[0] if predicted else "none", row["text"])
             for row, predicted in scored]
    memory_tp = sum(1 for e, p, _ in first if e != "none" and p != "none")
    memory_fp = sum(1 for e, p, _ in first if e == "none" and p != "none")
    memory_fn = sum(1 for e, p, _ in first if e != "none" and p == "none")
    typed = [(e, p) for e, p, _ in first if e != "none" and p != "none"]
    emit({
        "benchmark": "extraction",
        "extractor": args.extractor,
        "data": Path(args.data).name,
        "lines": len(scored),
        "accuracy": round(sum(1 for e, p, _ in first if e == p) / len(first), 3),
        "memory_or_not": {
            "precision": round(memory_tp / (memory_tp + memory_fp), 3) if memory_tp else 0.0,
            "recall": round(memory_tp / (memory_tp + memory_fn), 3) if memory_tp else 0.0,
            "assistant_lines_stored": sum(1 for row, predicted in scored
                                          if row["role"] == "assistant" and predicted),
        },
        "extra_candidates": sum(max(0, len(predicted) - 1) for _, predicted in scored),
        "type_accuracy_when_both_memory": round(
            sum(1 for e, p in typed if e == p) / max(1, len(typed)), 3),
        "per_type": per_type,
        "confusions": dict(Counter(f"{e} -> {p}" for e, p, _ in first if e != p)
                           .most_common(15)),
        "misses": [t for e, p, t in first if e != p][:40],
    })


if __name__ == "__main__":
    main()
