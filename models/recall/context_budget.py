"""Context formats and budgets (docs/concepts/governance.md#context-formats-and-budgets).

- ``relevant-memory`` is seed 001's block: ``[Relevant Memory]`` then one ``- `` line
  per recalled memory (its content on one line), best first;
- every context takes a budget in characters and/or in tokens and keeps whole lines
  only, from the top: a line that does not fit ends the block (seed 002's "strict
  char/token budget").

Tokens are counted without a model's tokenizer, as words and single punctuation marks
(:func:`count_tokens`): for English text that is at or above what GPT-style BPE
tokenizers count, so a block within the budget here is within it there too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from orchmem.models.recall.bundle import RecallBundle

HEADER = "[Relevant Memory]"
MAX_LINE_CHARS = 300
_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Words and punctuation marks of ``text``."""
    return len(_TOKEN.findall(text))


def relevant_memory(bundle: RecallBundle) -> list[str]:
    """The lines of seed 001's block for ``bundle`` (the header alone when empty)."""
    return [HEADER, *(f"- {' '.join(item.memory.content.split())[:MAX_LINE_CHARS]}"
                      for item in bundle.nodes)]


def within_budget(lines: Sequence[str], max_chars: int | None = None,
                  max_tokens: int | None = None) -> str:
    """``lines`` joined by newlines, whole lines from the top while both budgets hold."""
    out: list[str] = []
    chars = tokens = 0
    for line in lines:
        more_chars = len(line) + (1 if out else 0)
        more_tokens = count_tokens(line)
        if (max_chars is not None and chars + more_chars > max_chars) or \
                (max_tokens is not None and tokens + more_tokens > max_tokens):
            break
        out.append(line)
        chars += more_chars
        tokens += more_tokens
    return "\n".join(out)
