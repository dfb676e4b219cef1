"""Who a question is about and who said a memory (rules on capitalised words).

A transcript turn is stored as "<speaker>: <what they said>". A question that names
someone ("What is Joanna inspired by?") is most often answered by what that person
said: on LoCoMo, when a question names one of the two speakers, 96% of its evidence
turns are that speaker's, while only half of all turns are. Full text cannot see this
(the name is in every turn of that speaker's label, and in the other speaker's turns
that address them), so the router's plan (models/recall/router.py) favours a memory whose
speaker is named in the question, and searches without the names that label many
memories: such a name says who, which the favour already covers, and left in the
query it pulls both searches towards every short turn that names the person ("See ya
Nate!") instead of the topic asked about.
"""

from __future__ import annotations

import re

from orchmem.models.language.textquery import STOPWORDS, query_terms

#: Characters of a query the rules look at, and names taken from it (each name costs
#: recall one indexed lookup, models/storage/search/fts.py ``labelled``).
MAX_QUERY_CHARS = 500
MAX_NAMES = 8
#: A speaker's name before a colon at the start of a memory: one to three capitalised
#: words (the same label models/language/substance.py leaves out of a memory's words).
LABEL = re.compile(r"^\s*([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s")
_NAME = re.compile(r"\b[A-Z][a-z][\w-]*")
#: Words of a request that name no topic ("Tell me about Nate": the topic is Nate).
_REQUEST = frozenset(("tell", "know", "say", "said", "talk", "describe", "anything",
                      "something", "everything", "please", "info", "information", "give",
                      "show", "summary", "summarize", "summarise", "remember", "recall"))


def named(query: str) -> tuple[str, ...]:
    """The capitalised words of ``query`` after its first word (names, and the odd
    month or place: a name that no memory's speaker has changes nothing)."""
    head = query[:MAX_QUERY_CHARS].strip()
    first = re.match(r"\W*\w+", head)
    rest = head[first.end():] if first else head
    return tuple(dict.fromkeys(_NAME.findall(rest)))[:MAX_NAMES]


def speaker(content: str) -> str | None:
    """The speaker label of ``content`` ("Joanna: ..." -> "Joanna"), or None."""
    found = LABEL.match(content[:100])
    return found.group(1) if found else None


def without(text: str, names: tuple[str, ...]) -> str:
    """``text`` without ``names`` (and their possessive "'s"), spaces tidied."""
    for name in names:
        text = re.sub(rf"\b{re.escape(name)}(?:['\u2019]s)?\b", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def has_topic(text: str) -> bool:
    """Whether ``text`` has a word beyond function words and request words: a question
    left without one after its names are dropped is about the person, and keeps them."""
    return any(t.lower() not in STOPWORDS and t.lower() not in _REQUEST
               for t in query_terms(text))
