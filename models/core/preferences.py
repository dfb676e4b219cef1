"""What a preference prefers, and over what: enough to tell two opposite ones apart.

"I prefer coffee to tea" prefers coffee over tea; "Prefers tea" prefers tea over
nothing said. Two preferences of the same person are **opposite** when what one prefers
is what the other puts below ("coffee to tea" against "tea"; "green tea to coffee"
against "coffee to tea"). Their words are nearly the same, so neither an embedding nor a
word overlap can tell them from a restatement: reconciliation (models/writeback/reconcile.py) asks
:func:`opposite` before it merges two preferences as near-duplicates, and links opposite
ones even when their vectors are far apart. A preference that only **restates** an older
one ("Prefers email" after "I prefer email over phone calls": the same thing preferred,
nothing new put below it) reinforces the older one instead of contradicting it.

Rules over words, linear in the text read (at most ``MAX_PREFERENCE_CHARS`` characters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Characters of a memory read (a preference is one sentence).
MAX_PREFERENCE_CHARS = 600

_PREFERS = re.compile(r"\b(?:prefers?|preferring|favou?rs?|rather)\b\s*(?P<rest>.*)",
                      re.IGNORECASE | re.DOTALL)
_OVER = re.compile(r"\b(?:to|over|than|instead of|versus|vs|not|rather than)\b", re.IGNORECASE)
_WORD = re.compile(r"\w+")
#: Words that say nothing of what is preferred.
_FILLER = frozenset({"a", "an", "the", "my", "our", "their", "his", "her", "some", "much",
                     "more", "really", "very", "so", "always", "usually", "generally",
                     "strongly", "still", "definitely", "it", "them", "one", "ones", "and",
                     "or", "be", "being", "have", "having", "use", "using", "get", "getting",
                     "take", "taking", "go", "with", "for", "of", "in", "on", "at", "by"})


@dataclass(frozen=True)
class Sides:
    """The words of what is preferred, and of what it is preferred to (maybe none)."""

    preferred: frozenset[str]
    over: frozenset[str]


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.casefold()) if w not in _FILLER)


def sides(content: str) -> Sides | None:
    """What ``content`` prefers and to what, or None when it says no "prefer"/"rather"."""
    found = _PREFERS.search(content[:MAX_PREFERENCE_CHARS])
    if found is None:
        return None
    rest = found.group("rest")
    split = _OVER.search(rest)
    preferred = _words(rest if split is None else rest[: split.start()])
    over = frozenset() if split is None else _words(rest[split.end():])
    return Sides(preferred, over) if preferred else None


def _same_thing(a: frozenset[str], b: frozenset[str]) -> bool:
    """True when the words of one name the other ("tea" and "green tea")."""
    return bool(a) and bool(b) and (a <= b or b <= a)


def opposite(a: str, b: str) -> bool:
    """True when preference ``a`` prefers what ``b`` puts below, or the reverse."""
    left, right = sides(a), sides(b)
    if left is None or right is None:
        return False
    return (_same_thing(left.preferred, right.over) or _same_thing(left.over, right.preferred))


def restates(newer: str, older: str) -> bool:
    """True when preference ``newer`` prefers what ``older`` does and puts nothing below
    it that ``older`` did not."""
    new, old = sides(newer), sides(older)
    if new is None or old is None or opposite(newer, older):
        return False
    return _same_thing(new.preferred, old.preferred) and new.over <= old.over
