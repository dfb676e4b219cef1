"""Extraction: messages or documents in, candidate memories out.

An extractor is one function, ``(messages, kind) -> list[Candidate]``; the rules-first
:func:`rules_extractor` is the default, and a deployment can plug in another (an LLM
extractor, say) by naming ``"package.module:function"`` in
``memory.writeback.extractor``.

The rules are precise rather than greedy. In a transcript only the user's own
messages can become memories; questions, requests to the assistant, greetings and
small talk never do. A sentence becomes a memory only when it matches a pattern of
one type (identity, preference, decision, goal, todo, fact, event); a hedged one
("maybe", "I think") is kept with lower confidence and counts as inferred, not stated.

Documents (ingest files, workflow step text) are read structurally: headings name
the type of the list items under them ("## Decisions"), line markers name their own
("Decision:", "TODO:", "- [ ]", "Goal:"), sentences go through the same rules, and any
other paragraph becomes an Observation.

Every candidate carries a ``subject`` when it fills an exclusive slot (a name, a
location, a deadline, a favourite, a preference between options, whether one likes
something), with the ``value`` it gives that slot: a later candidate with the same
subject and another value is an update or a contradiction (see ``reconcile``).

Extraction is linear in its input. The patterns read at most ``MAX_SENTENCE_CHARS``
characters at a time (a sentence, a list item, an explicit memory), every pattern is
linear in what it reads (see ``extraction_rules``), and a document's work can be
capped by an :class:`ExtractionBudget`, as ingest does for each file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from orchmem.config import ExtractionBudgetExceeded, MemoryValidationError
from orchmem.models.core.registry import resolve
from orchmem.models.core.shapes import MemoryType
from orchmem.models.writeback.extraction_rules import RULES, Rule

Kind = Literal["transcript", "document"]

IMPORTANCE = {
    MemoryType.IDENTITY: 70, MemoryType.PREFERENCE: 60, MemoryType.DECISION: 75,
    MemoryType.GOAL: 70, MemoryType.TODO: 65, MemoryType.FACT: 55, MemoryType.EVENT: 45,
    MemoryType.OBSERVATION: 30,
}
STATED_CONFIDENCE = 0.9
HEDGED_CONFIDENCE = 0.55
DOCUMENT_CONFIDENCE = 0.8
OBSERVATION_CONFIDENCE = 0.7
#: The most characters a pattern reads at a time: a longer sentence is cut, and only
#: the start of a longer list item or explicit memory is classified.
MAX_SENTENCE_CHARS = 600


@dataclass(frozen=True)
class Message:
    role: str  # user | assistant | system | tool
    text: str


@dataclass(frozen=True)
class Candidate:
    """A memory the extractor proposes (validated against the schema afterwards)."""

    type: MemoryType
    content: str
    importance: int
    confidence: float
    #: Said by the user in their own words (not hedged, not inferred by a workflow).
    stated: bool = False
    subject: str | None = None
    value: str | None = None


Extractor = Callable[[Sequence[Message], Kind], list[Candidate]]


# ---------------------------------------------------------------------------- budget

#: What one pattern run costs on top of the characters it reads, in characters: the
#: fixed price of a call, so that a million tiny sentences are not free. Measured with
#: benchmarks/extraction_scaling.py on the 2-core test machine: with 8, a second of
#: extraction counts 27-31 M for paragraphs, keyword-dense sentences and short list
#: items, and 57 M for one-word sentences; the count errs high, never low.
RUN_OVERHEAD_CHARS = 8


class ExtractionBudget:
    """The work extracting one document may do, counted in characters read.

    Every pattern run over ``n`` characters costs ``n + RUN_OVERHEAD_CHARS``; the
    count depends on the text alone, so a document is always within its budget or
    always over it. ``max_s`` is a backstop in wall-clock seconds from the budget's
    creation, for work the count misjudges. :meth:`charge` raises
    :class:`~orchmem.config.errors.ExtractionBudgetExceeded` when either runs out;
    ``ExtractionBudget()`` only counts (``spent``).
    """

    def __init__(self, max_chars: int | None = None, max_s: float | None = None) -> None:
        self.max_chars = max_chars
        self.max_s = max_s
        self.spent = 0
        self._deadline = None if max_s is None else time.monotonic() + max_s

    def charge(self, chars: int, runs: int = 1) -> None:
        """Count ``runs`` pattern runs over ``chars`` characters each."""
        self.spent += runs * (chars + RUN_OVERHEAD_CHARS)
        if self.max_chars is not None and self.spent > self.max_chars:
            raise ExtractionBudgetExceeded(
                f"extraction needs more than its budget of {self.max_chars:,} characters "
                "read by the rules; split the document or raise the budget")
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise ExtractionBudgetExceeded(
                f"extraction ran longer than its budget of {self.max_s:g} s "
                f"(after {self.spent:,} characters read by the rules)")


# ---------------------------------------------------------------------------- sentences


def _r(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_QUESTION_START = _r(r"^(?:what|how|why|when|where|who|whom|which|whose|is|are|do|does|did|can|"
                     r"could|would|will|should|shall|may|have|has)\b")
_REQUEST = _r(r"^(?:please |pls |kindly )?(?:can you|could you|would you|will you|"
              r"i (?:need|want|would like|'d like) you to|show|tell|"
              r"explain|help|give|find|list|summari[sz]e|translate|write me|draft|generate|"
              r"check|look up|search)\b")
_CHATTER = _r(r"^(?:hi|hello|hey|thanks|thank you|thx|ok|okay|sure|great|cool|nice|lol|haha|"
              r"bye|good (?:morning|night|evening|afternoon)|yes|no|yep|nope|alright|got it|"
              r"i see|i know|i guess so|i think so|sounds good|perfect|awesome|wow)\b[\s!.,]*$")
_HEDGE = _r(r"\b(?:maybe|perhaps|probably|possibly|i think|i guess|i suppose|might|not sure|"
            r"i'm not certain|kind of thinking)\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")
_ARTICLES = re.compile(r"\b(?:a|an|the|my|our|some|really|very|so|much|more|than)\b")


def split_sentences(text: str) -> list[str]:
    parts = (p.strip(" \t-*•") for p in _SENTENCE_END.split(text))
    return [p[:MAX_SENTENCE_CHARS] for p in parts if p]


def normalize_value(value: str) -> str:
    """A slot value for comparison: lower case, no articles, no punctuation."""
    words = re.findall(r"\w+", _ARTICLES.sub(" ", value.casefold()))
    return " ".join(words)


def _subject(rule: Rule, match: re.Match[str]) -> str | None:
    if rule.subject is None:
        return None
    groups = {k: normalize_value(v or "") for k, v in match.groupdict().items()}
    return rule.subject.format(**groups) if "{" in rule.subject else rule.subject


def _value(rule: Rule, match: re.Match[str], sentence: str) -> str:
    if rule.subject and rule.subject.startswith("like:"):
        negative = re.search(r"\b(?:do not|don't|never|no longer|can't|cannot)\b", sentence, re.I)
        return "dislike" if negative else "like"
    return normalize_value(match.group("v") or sentence)


def classify(sentence: str, *, stated: bool,
             budget: ExtractionBudget | None = None) -> Candidate | None:
    """The candidate one sentence yields, or None (question, request, chatter, no rule).

    Only the first ``MAX_SENTENCE_CHARS`` characters are classified; the candidate's
    content is the whole text. Raises ExtractionBudgetExceeded when ``budget`` runs out.
    """
    budget = budget if budget is not None else ExtractionBudget()
    text = sentence.strip().replace("\u2019", "'").replace("\u2018", "'")
    view = text[:MAX_SENTENCE_CHARS].rstrip()
    if len(view) < 3 or view.endswith("?") or _CHATTER.match(view):
        budget.charge(len(view))
        return None
    if _QUESTION_START.match(view) or _REQUEST.match(view):
        budget.charge(len(view), 3)
        return None
    core = view.rstrip(".!")
    for tried, rule in enumerate(RULES, start=1):
        match = rule.find(core)
        if match is None:
            continue
        budget.charge(len(view), 4 + tried)
        hedged = bool(_HEDGE.search(view))
        return Candidate(
            type=rule.type,
            content=text,
            importance=IMPORTANCE[rule.type],
            confidence=HEDGED_CONFIDENCE if hedged else (
                STATED_CONFIDENCE if stated else DOCUMENT_CONFIDENCE),
            stated=stated and not hedged,
            subject=_subject(rule, match),
            value=_value(rule, match, core),
        )
    budget.charge(len(view), 3 + len(RULES))
    return None


def subject_of(memory_type: MemoryType, content: str) -> tuple[str | None, str | None]:
    """Subject and value of a memory given in full (explicit or from a workflow), if any.

    Read from the first ``MAX_SENTENCE_CHARS`` characters of ``content``, as
    :func:`classify` does.
    """
    candidate = classify(content, stated=False)
    if candidate is None or candidate.type != memory_type:
        return None, None
    return candidate.subject, candidate.value


# ---------------------------------------------------------------------------- documents

_HEADING = re.compile(r"^(#{1,6})\s+(?P<t>.+)$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(?P<t>.+)$")
_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[(?P<x>[ xX])\]\s+(?P<t>.+)$")
_SECTION_TYPES = (
    (re.compile(r"decision", re.I), MemoryType.DECISION),
    (re.compile(r"\bto-?dos?\b|tasks?|action items?|next steps?|follow.?ups?", re.I),
     MemoryType.TODO),
    (re.compile(r"goals?|objectives?|okrs?|milestones?", re.I), MemoryType.GOAL),
    (re.compile(r"preferences?|likes|dislikes|style guide", re.I), MemoryType.PREFERENCE),
    (re.compile(r"about me|profile|identity|who i am|bio", re.I), MemoryType.IDENTITY),
    (re.compile(r"facts?|key info|reference|contacts?", re.I), MemoryType.FACT),
    (re.compile(r"events?|timeline|history|changelog|log\b", re.I), MemoryType.EVENT),
    (re.compile(r"notes?|observations?|findings?", re.I), MemoryType.OBSERVATION),
)


def heading_title(text: str) -> str:
    """A heading's title: ``text`` without the closing ``#`` and the spaces before them.

    What ``(?P<t>.+?)\\s*#*$`` captures (the shortest title, at least one character),
    without that pattern's retries, quadratic on a long run of spaces or ``#``.
    """
    return text.rstrip("#").rstrip() or text[:1]


def _section_type(heading: str) -> MemoryType | None:
    for pattern, memory_type in _SECTION_TYPES:
        if pattern.search(heading):
            return memory_type
    return None


def _from_item(text: str, section: MemoryType | None,
               budget: ExtractionBudget) -> Candidate | None:
    found = classify(text, stated=False, budget=budget)
    if found is not None:
        return found
    if section is not None:
        return Candidate(type=section, content=text, importance=IMPORTANCE[section],
                         confidence=DOCUMENT_CONFIDENCE)
    return None


def _observation(text: str) -> Candidate:
    return Candidate(type=MemoryType.OBSERVATION, content=text,
                     importance=IMPORTANCE[MemoryType.OBSERVATION],
                     confidence=OBSERVATION_CONFIDENCE)


def _item(line: str, section: MemoryType | None, budget: ExtractionBudget) -> Candidate | None:
    """The candidate of a checkbox or list item line; None for any other line."""
    box = _CHECKBOX.match(line)
    if box:
        item = box.group("t").strip()
        if box.group("x") == " ":
            return Candidate(type=MemoryType.TODO, content=item,
                             importance=IMPORTANCE[MemoryType.TODO],
                             confidence=DOCUMENT_CONFIDENCE)
        return Candidate(type=MemoryType.EVENT, content=f"Done: {item}",
                         importance=IMPORTANCE[MemoryType.EVENT],
                         confidence=DOCUMENT_CONFIDENCE)
    listed = _LIST_ITEM.match(line)
    if listed is None:
        return None
    item = listed.group("t").strip()
    return _from_item(item, section, budget) or _observation(item)


def extract_document(text: str, budget: ExtractionBudget | None = None) -> list[Candidate]:
    """Candidates from a Markdown or plain-text document (see the module docstring).

    Raises ExtractionBudgetExceeded when ``budget`` runs out; without one, nothing is
    capped (the work is still linear in ``text``).
    """
    spend = budget if budget is not None else ExtractionBudget()
    out: list[Candidate] = []
    section: MemoryType | None = None
    paragraph: list[str] = []

    def flush() -> None:
        if not paragraph:
            return
        block = " ".join(paragraph).strip()
        paragraph.clear()
        spend.charge(len(block))
        typed = [c for c in (classify(s, stated=False, budget=spend)
                             for s in split_sentences(block)) if c]
        if typed:
            out.extend(typed)
        elif section is not None:
            out.append(replace(_observation(block), type=section,
                               importance=IMPORTANCE[section], confidence=DOCUMENT_CONFIDENCE))
        elif len(block) >= 12:
            out.append(_observation(block[:4000]))

    for line in text.splitlines():
        spend.charge(len(line), 3)  # the heading, checkbox and list item patterns
        if not line.strip():
            flush()
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            title = heading_title(heading.group("t"))[:MAX_SENTENCE_CHARS]
            spend.charge(len(title), len(_SECTION_TYPES))
            section = _section_type(title)
            continue
        item = _item(line, section, spend)
        if item is not None:
            flush()
            out.append(item)
            continue
        paragraph.append(line.strip())
    flush()
    return [c for c in out if c.content]


# ---------------------------------------------------------------------------- extractors


def rules_extractor(messages: Sequence[Message], kind: Kind) -> list[Candidate]:
    """The default extractor: rules only, no model, deterministic."""
    if kind == "document":
        return [c for m in messages for c in extract_document(m.text)]
    out = []
    for message in messages:
        if message.role != "user":
            continue  # assistant chatter, tool output and system prompts are not memory
        for sentence in split_sentences(message.text):
            candidate = classify(sentence, stated=True)
            if candidate is not None:
                out.append(candidate)
    return out


#: The extractors ``memory.writeback.extractor`` may name without a module path.
EXTRACTORS: dict[str, Extractor] = {"rules": rules_extractor}


def load_extractor(spec: str) -> Extractor:
    """The extractor ``spec`` names: ``"rules"`` or ``"package.module:function"``.

    Raises MemoryValidationError (the write-back is rejected) when it cannot be resolved.
    """
    return resolve(spec, EXTRACTORS, setting="memory.writeback.extractor",
                   error=MemoryValidationError)
