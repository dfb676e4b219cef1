"""Extraction scaling: seconds per document size, doubling up to 5 MB, per shape of input.

Each shape is one hostile or ordinary document, built at 5 MiB / 2**12 (1,280
characters) and doubled twelve times up to 5 MiB (``memory.ingest.max_file_size_mb``),
then run through ``extract_document`` with a counting budget (no limit: the
extractor's own time is measured, not the time until a budget rejects). Prints JSON:
per shape the sizes, the best-of-``--repeat`` seconds, the work counted by the budget
(characters read by the rules, see ``ExtractionBudget``), and the ratio
time(2n) / time(n), which is about 2 when extraction is linear (4 when quadratic).

    python benchmarks/extraction_scaling.py [--max-mb 5] [--shape list_item]...
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable

from _harness import emit

from orchmem.models.writeback.extraction import ExtractionBudget, extract_document

#: Sizes below this are timed this many times more (a run there takes microseconds).
SMALL_CHARS = 100_000


def _repeat(unit: str, prefix: str = "") -> Callable[[int], str]:
    return lambda n: (prefix + unit * (n // len(unit) + 1))[:n]


#: name -> a document of about n characters.
SHAPES: dict[str, Callable[[int], str]] = {
    # The case: one Markdown list item, no sentence end.
    "list_item": _repeat("x ", "- I "),
    # One paragraph line of ordinary sentences, each classified.
    "paragraph": _repeat("We shipped the billing rewrite last week and it went well. "),
    # One paragraph line without a sentence end (cut to one sentence).
    "paragraph_no_end": _repeat("x ", "I "),
    # One list item of the words the look-ahead rules look for, no sentence end.
    "trigger_item": _repeat("that's final is my favorite yesterday went I am my name is "
                            "decided ", "- "),
    # The same words as one long paragraph line.
    "trigger_paragraph": _repeat("That's final, is my favorite. Yesterday I went. I am Dana. "
                                 "My name is Dana. We decided to go. "),
    # Nested punctuation and quotes, no sentence end.
    "punctuation": _repeat("(\"I'm 'x', that's final\"), "),
    # Sentences of 600 characters dense with a word six rules start on (each tries up to
    # 40 characters after every "my" unless the rest of its pattern occurs).
    "keyword_sentences": _repeat("My " + "my " * 195 + "my. "),
    # Many tiny sentences: the most pattern runs per character.
    "short_sentences": _repeat("I x. "),
    # Many short list items, one per line.
    "many_items": _repeat("- I prefer tea\n"),
    # A heading with a long run of spaces: quadratic under the old heading pattern.
    "heading_spaces": lambda n: "# a" + " " * max(0, n - 4) + "b",
    # An open checkbox with a long task.
    "checkbox": _repeat("x ", "- [ ] "),
}


def timed(text: str, repeat: int) -> tuple[float, int]:
    """Best seconds over ``repeat`` runs, and the work the budget counted."""
    best, spent = float("inf"), 0
    for _ in range(repeat):
        budget = ExtractionBudget()
        start = time.perf_counter()
        extract_document(text, budget)
        best = min(best, time.perf_counter() - start)
        spent = budget.spent
    return best, spent


def measure(build: Callable[[int], str], sizes: list[int], repeat: int) -> dict[str, object]:
    seconds, work = [], []
    for size in sizes:
        best, spent = timed(build(size), repeat * (10 if size < SMALL_CHARS else 1))
        seconds.append(round(best, 6))
        work.append(spent)
    ratios = [round(b / a, 2) if a else None for a, b in itertools.pairwise(seconds)]
    large = [r for r, size in zip(ratios, sizes[1:], strict=True)
             if r is not None and size >= SMALL_CHARS]
    return {"sizes": sizes, "seconds": seconds, "work_chars": work, "ratios": ratios,
            "median_ratio_from_100k": round(statistics.median(large), 2) if large else None,
            "work_per_char": round(work[-1] / sizes[-1], 1),
            "chars_per_s": round(sizes[-1] / seconds[-1]) if seconds[-1] else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-mb", type=float, default=5.0)
    parser.add_argument("--doublings", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES))
    args = parser.parse_args()
    largest = int(args.max_mb * 1024 * 1024)
    sizes = [largest >> k for k in range(args.doublings, -1, -1)]
    results = {name: measure(SHAPES[name], sizes, args.repeat)
               for name in (args.shape or SHAPES)}
    emit({
        "benchmark": "extraction_scaling",
        "budget": "counting only (no limit): the extractor's own time",
        "shapes": results,
        "max_median_ratio": max(r["median_ratio_from_100k"] or 0 for r in results.values()),
    })


if __name__ == "__main__":
    main()
