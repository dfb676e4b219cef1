"""Precision and recall of the secret detector on a labelled JSON-lines set.

Each line is ``{"text": ..., "secret": true|false, "kind"?: rule}``. Used by
``benchmarks/secret_detector.py`` (its figures:
docs/concepts/governance.md#the-secret-detector) and its unit test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchmem.config.governance import SECRET_RULES
from orchmem.models.writeback.secrets import find_secrets


def score(path: Path, rules: tuple[str, ...] = SECRET_RULES) -> dict[str, Any]:
    """Counts, precision, recall and the misses of the detector on ``path``."""
    tp = fp = fn = tn = 0
    misses: list[dict[str, Any]] = []
    for line in path.read_text("utf-8").splitlines():
        row = json.loads(line)
        found = find_secrets(row["text"], rules)
        if row["secret"] and found:
            tp += 1
        elif row["secret"]:
            fn += 1
            misses.append({"missed": row.get("kind"), "text": row["text"]})
        elif found:
            fp += 1
            misses.append({"falseAlarm": found, "text": row["text"]})
        else:
            tn += 1
    return {"examples": tp + fp + fn + tn, "secrets": tp + fn, "truePositives": tp,
            "falsePositives": fp, "falseNegatives": fn, "trueNegatives": tn,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None, "misses": misses}
