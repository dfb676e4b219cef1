"""Which memory types a question is about, read off its words (rules, no model).

"What did we decide about the launch?" asks for a Decision; "what do I prefer?" for
a Preference; "what is left to do?" for Todos. Recall multiplies the score of a
memory of a favoured type by ``1 + memory.retrieval.intent_weight``: the type breaks a
near tie between memories the search found equally well, it never brings in one the
search did not find. A question that names no type favours none.
"""

from __future__ import annotations

import re

from orchmem.models.core.shapes import MemoryType

#: A question about who someone is: their name ("what is the user's name?", "what is
#: she called?"), how to address them, "who am I". A thing's name ("the name of the
#: restaurant") is not asked here: the name must belong to a person word.
_PERSON = (r"(?:my|your|his|her|their|the (?:user|customer|client|person)(?:'s)?|"
           r"(?:user|customer|client)'s)")
_SOMEONE = r"(?:me|him|her|them|the (?:user|customer|client))"
IDENTITY_QUESTION = (rf"\b(who am i|who is (?:the|this) (?:user|customer|client)(?!')|identity|"
                     rf"{_PERSON} (?:full |first |last |real |preferred |nick)?name|"
                     r"what (?:is|are|am|do|does|should) "
                     r"(?:i|we|you|he|she|they|the (?:user|customer|client)) (?:be )?called|"
                     rf"call {_SOMEONE}|address {_SOMEONE})\b")

_RULES: tuple[tuple[re.Pattern[str], MemoryType], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), memory_type) for pattern, memory_type in (
        (r"\b(decid\w*|decision\w*|agreed|settled on|chose|chosen|go ahead)\b",
         MemoryType.DECISION),
        (r"\b(prefer\w*|favou?rite\w*|like best|rather have)\b", MemoryType.PREFERENCE),
        (r"\b(todos?|to-dos?|to do|remind\w*|left to do|open items?)\b",
         MemoryType.TODO),
        (r"\b(goals?|aim\w*|objectives?|trying to achieve)\b", MemoryType.GOAL),
        (IDENTITY_QUESTION, MemoryType.IDENTITY),
    ))

#: Characters of a query the rules look at (a question, not a document).
MAX_INTENT_CHARS = 500


def favoured_types(query: str) -> frozenset[str]:
    """The memory types ``query`` asks about (their values), possibly none."""
    head = query[:MAX_INTENT_CHARS]
    return frozenset(t.value for pattern, t in _RULES if pattern.search(head))
