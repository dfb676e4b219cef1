"""Precision and recall of the rules-first secret detector (models/writeback/secrets.py).

Two labelled sets in tests/data/secrets/: ``labelled.jsonl`` was written together with
the rules (they were fitted to it), ``heldout.jsonl`` was written after them and never
used to change a rule. Prints one JSON object with both scores and the misses.

    python benchmarks/secret_detector.py
"""

from __future__ import annotations

from pathlib import Path

from _harness import emit

from orchmem.models.writeback.secret_scores import score

DATA = Path(__file__).parents[1] / "tests" / "data" / "secrets"


def main() -> None:
    emit({"benchmark": "secret_detector",
          **{name: score(DATA / f"{name}.jsonl") for name in ("labelled", "heldout")}})


if __name__ == "__main__":
    main()
