"""The router: what kind of question a query is, and the retrieval plan for it (rules).

Five kinds, tried in this order (the first rule that fires wins):

- ``similar_case``  "have we seen this before?", "a similar problem", "last time we...";
- ``entity_time``   a date or period in the question ("in May 2023", "last week") or a
  question about when ("when did...", "how long ago", "what year");
- ``what_happened`` "what happened", "what did X do", "how did it go";
- ``profile``       preferences and identity ("what does she like", "the user's name");
- ``semantic``      anything else.

A :class:`Plan` says what recall does beyond the hybrid search: the time window of the
question (its dated phrases resolved against the recall's clock, models/language/timeexpr.py)
and how strongly a memory inside it is favoured; how many of the first hits are
expanded to their neighbours (the memories next to them in the same conversation and
those their edges reach) and how much of a hit's score a neighbour inherits (more
for the memory right after a hit that asked a question: most likely its answer). The
plan is in the bundle
(``RecallBundle.plan``), so a caller sees why it got what it got.

The weights were chosen on LoCoMo (benchmarks/locomo.py;
docs/concepts/recall.md#the-router) for what generalises across conversations, never
per question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Any

from orchmem.models.language.intent import IDENTITY_QUESTION
from orchmem.models.language.speakers import named
from orchmem.models.language.textquery import STOPWORDS
from orchmem.models.language.timeexpr import TimeRef, resolve, window

#: Characters of a query the rules look at.
MAX_ROUTE_CHARS = 500


_ANY_DAY = date(2000, 1, 1)


class Intent(StrEnum):
    SIMILAR_CASE = "similar_case"
    ENTITY_TIME = "entity_time"
    WHAT_HAPPENED = "what_happened"
    PROFILE = "profile"
    SEMANTIC = "semantic"


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_SIMILAR = _rx(r"\b(similar|same (problem|issue|error|thing)|seen (this|that|it)(?: \w+)? before|"
               r"happened before|last time (we|i|you)|like (the )?last time|precedent|"
               r"previous (case|incident|time))\b")
_WHEN = _rx(r"\b(when|how long (ago|since|before|after)|what (year|month|day|date|time)|"
            r"which (year|month|day|date)|since when|how many (days|weeks|months|years))\b")
_HAPPENED = _rx(r"\b(what happened|what did \w+(?: \w+)? do|how did (it|that|the \w+) go|"
                r"what (has|have) \w+ (done|been doing)|what went|outcome|activities|"
                r"what (events?|things) did)\b")
_PROFILE = _rx(r"\b(prefer\w*|favou?rite|likes?|loves?|enjoys?|hates?|dislikes?|hobb(y|ies)|"
               r"interest(s|ed)|allerg\w*|personality|values)\b|" + IDENTITY_QUESTION)


@dataclass(frozen=True)
class Plan:
    """What recall does for one query beyond the hybrid search."""

    intent: Intent
    #: The days the question is about (inclusive), or None.
    window: tuple[date, date] | None = None
    window_phrases: tuple[str, ...] = ()
    #: A memory dated inside the window has its score multiplied by 1 + this.
    window_boost: float = 0.0
    #: A question about when: a memory whose content names a date (or a day relative
    #: to when it was said) has its score multiplied by 1 + this.
    dated_boost: float = 0.0
    #: The first hits expanded to their neighbours, and the share of a hit's score a
    #: neighbour gets (it keeps its own score when that is higher).
    expand_hits: int = 0
    expand_share: float = 0.0
    #: The share of the memory right after a hit that asked a question (its answer).
    answer_share: float = 0.0
    #: Neighbours in the same conversation within this many turns of a hit.
    session_radius: int = 2
    #: After the expansion: the score of a memory that asks (ends with "?") or is
    #: terse (a few words) is multiplied by these (models/language/substance.py; 1: off).
    asks_factor: float = 1.0
    terse_factor: float = 1.0
    #: For a question about when (a window or the dated favour): a memory whose
    #: content names a day keeps its score through substance ("Alright, see you
    #: tomorrow!" is terse but says when).
    dated_substance: bool = False
    #: The capitalised words of the question (models/language/speakers.py): a memory whose
    #: speaker is one of them has its score multiplied by 1 + speaker boost.
    names: tuple[str, ...] = ()
    speaker_boost: float = 0.0
    #: Names that label at least this many memories are left out of the searched text
    #: (0: never); recall fills ``speakers`` with those it left out.
    speaker_labels: int = 0
    speakers: tuple[str, ...] = ()
    #: With a window: the memories dated inside it (said in it or up to
    #: ``dated_after_days`` after it), best this many by cosine, are a third list of
    #: the fusion (0: none): a memory of the asked days the searches did not reach.
    dated_hits: int = 0
    dated_after_days: int = 0
    #: The relevance floor as a gate (models/recall/plans.py ``gate_floor``): when at
    #: least one candidate passes the settings' floor, the others are held to this lower
    #: one instead (cosine, and cosine with full text); None: the settings' floor alone.
    answered_floor: tuple[float, float] | None = None
    #: The favours (window, dated, speaker) after the expansion, reaching the memories
    #: it added, instead of before it, handed on with the hits' scores
    #: (models/recall/plans.py ``planned``).
    favour_after_expansion: bool = False
    #: The question names days and nothing else to find ("what did we talk about on
    #: Tuesday?"): its window list is the answer, kept whatever its cosine.
    window_only: bool = False

    def dump(self) -> dict[str, Any]:
        return {"intent": self.intent.value,
                "window": [self.window[0].isoformat(), self.window[1].isoformat()]
                if self.window else None,
                "windowPhrases": list(self.window_phrases), "windowBoost": self.window_boost,
                "datedBoost": self.dated_boost,
                "expandHits": self.expand_hits, "expandShare": self.expand_share,
                "answerShare": self.answer_share,
                "sessionRadius": self.session_radius,
                "asksFactor": self.asks_factor, "terseFactor": self.terse_factor,
                "datedSubstance": self.dated_substance,
                "names": list(self.names), "speakerBoost": self.speaker_boost,
                "speakerLabels": self.speaker_labels, "speakers": list(self.speakers),
                "datedHits": self.dated_hits, "datedAfterDays": self.dated_after_days,
                "answeredFloor": list(self.answered_floor) if self.answered_floor else None,
                "favourAfterExpansion": self.favour_after_expansion,
                "windowOnly": self.window_only}


def classify(query: str, refs: list[TimeRef] | None = None) -> Intent:
    """The kind of question ``query`` is (rules; see the module's text)."""
    head = query[:MAX_ROUTE_CHARS]
    if refs is None:
        refs = resolve(head, _ANY_DAY, bare_months=True)  # only whether there is one matters
    if _SIMILAR.search(head):
        return Intent.SIMILAR_CASE
    if refs or _WHEN.search(head):
        return Intent.ENTITY_TIME
    if _HAPPENED.search(head):
        return Intent.WHAT_HAPPENED
    if _PROFILE.search(head):
        return Intent.PROFILE
    return Intent.SEMANTIC


#: Per kind: (window boost, dated boost, hits expanded, neighbour share).
_SHAPES: dict[Intent, tuple[float, float, int, float]] = {
    Intent.SIMILAR_CASE: (0.0, 0.0, 3, 0.5),
    Intent.ENTITY_TIME: (0.5, 0.3, 3, 0.5),
    Intent.WHAT_HAPPENED: (0.3, 0.0, 5, 0.6),
    Intent.PROFILE: (0.0, 0.0, 3, 0.5),
    Intent.SEMANTIC: (0.0, 0.0, 3, 0.5),
}


#: The share of a hit's score the memory after it gets when the hit asked a question.
ANSWER_SHARE = 0.9
#: The factors of a memory that asks and of a terse one (models/language/substance.py).
ASKS_FACTOR = 0.6
TERSE_FACTOR = 0.6
#: The favour of a memory said by someone the question names (models/language/speakers.py).
SPEAKER_BOOST = 0.5
#: A name that labels this many memories is a speaker's (models/language/speakers.py).
SPEAKER_LABELS = 10
#: A window's own list: its best memories by cosine, said in it or this many days after.
DATED_HITS = 10
DATED_AFTER_DAYS = 7
#: Once a question is answered (a candidate passed the floor): the lower floor of the
#: other candidates (cosine; cosine when full text found it too).
ANSWERED_FLOOR = (0.2, 0.1)
#: At most this many memories of a window are compared with the question.
MAX_DATED_SCAN = 1000


#: Words of a question about a conversation that name no topic of it.
_CONVERSATION_WORDS = frozenset((
    "talk", "talked", "talking", "discuss", "discussed", "say", "said", "chat", "chatted",
    "speak", "spoke", "happen", "happened", "go", "went", "us", "anything", "something",
    "else", "new", "tell", "remind", "again", "last", "time",
))


def _topicless(query: str, refs: list[TimeRef]) -> bool:
    """True when nothing but the dated phrases, function words and words about talking
    is left of ``query``: it asks what was said then, not about something."""
    for ref in refs:
        query = query.replace(ref.text, " ")
    words = {w.lower() for w in re.findall(r"[^\W_]+", query)}
    return not words - STOPWORDS - _CONVERSATION_WORDS


def plan(query: str, now: datetime) -> Plan:
    """The retrieval plan for ``query``, its dated phrases resolved against ``now``."""
    refs = resolve(query[:MAX_ROUTE_CHARS], now, bare_months=True)
    intent = classify(query, refs)
    boost, dated, hits, share = _SHAPES[intent]
    span = window(refs)
    only = span is not None and _topicless(query[:MAX_ROUTE_CHARS], refs)
    return Plan(intent=intent, window=span, window_only=only,
                window_phrases=tuple(r.text for r in refs),
                window_boost=boost if span else 0.0, dated_boost=0.0 if span else dated,
                expand_hits=hits, expand_share=share, answer_share=ANSWER_SHARE,
                asks_factor=ASKS_FACTOR, terse_factor=TERSE_FACTOR, dated_substance=True,
                names=named(query), speaker_boost=SPEAKER_BOOST,
                speaker_labels=SPEAKER_LABELS, dated_hits=DATED_HITS if span else 0,
                dated_after_days=DATED_AFTER_DAYS, answered_floor=ANSWERED_FLOOR,
                favour_after_expansion=True)
