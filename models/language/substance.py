"""How much a memory can answer a question, read off its words (rules, no model).

A memory that only asks ("What inspired you?") or only greets ("See ya Nate!") shares
the words of many questions but answers none of them. On LoCoMo a turn that asks is
evidence half as often as one that states (19% of them against 45%), and a turn of
fewer than :data:`TERSE_WORDS` words almost never is (4%), yet together they filled a
third of the router's top 10. The router's plan (models/recall/router.py) multiplies such a
memory's score by a factor below 1 after its neighbours have been expanded, so a
question that matched still hands its score to the answer after it.

A leading speaker label ("Joanna: ") and a trailing shared-image note ("[shares a
photo of ...]") are not counted as the memory's words.
"""

from __future__ import annotations

import re
from enum import StrEnum
from itertools import islice

from orchmem.models.language.speakers import LABEL

#: Fewer words than this (after the label) make a memory terse.
TERSE_WORDS = 5
#: Characters of a memory read (the end of a long memory does not change its kind).
MAX_SCAN_CHARS = 2000

_SHARED = re.compile(r"\s*\[shares? [^\]]*\]\s*$")
_WORD = re.compile(r"\w+")


class Kind(StrEnum):
    ASKS = "asks"
    TERSE = "terse"
    STATES = "states"


def kind(content: str) -> Kind:
    """Whether ``content`` asks (ends with a question mark), is terse, or states."""
    body = LABEL.sub("", content[:MAX_SCAN_CHARS], count=1).rstrip()
    if body.endswith("]"):  # the only way a shared-image note can end it
        body = _SHARED.sub("", body)
    body = body.strip()
    if body.endswith("?"):
        return Kind.ASKS
    # Recall asks this of every candidate: count words only up to the threshold.
    if len(list(islice(_WORD.finditer(body), TERSE_WORDS))) < TERSE_WORDS:
        return Kind.TERSE
    return Kind.STATES
