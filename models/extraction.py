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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from orchmem.config import MemoryValidationError

from .registry import resolve
from .schema import MemoryType

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


# ---------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    type: MemoryType
    pattern: re.Pattern[str]
    #: The subject: a fixed slot name, or a format over the match's groups.
    subject: str | None = None


def _r(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_NAME = r"(?P<v>[A-Z][\w'-]+(?: [A-Z][\w'-]+){0,2})"
_ROLE_WORDS = (r"engineer|developer|programmer|designer|manager|teacher|student|doctor|nurse|"
               r"lawyer|scientist|researcher|writer|artist|founder|co-founder|ceo|cto|cfo|coo|"
               r"consultant|analyst|architect|accountant|chef|parent|mother|father|mom|dad|"
               r"vegetarian|vegan|freelancer|photographer|musician|pilot|retiree|intern|lead|"
               r"head|director|owner|officer|coordinator|administrator|admin|specialist|"
               r"assistant|editor|recruiter|therapist|pharmacist|electrician|contractor|"
               r"professor|lecturer|tutor|volunteer|entrepreneur")
_I_AM = r"i(?:'m| am|m)"
_PAST_TIME = (r"yesterday|last (?:night|week|weekend|month|year|monday|tuesday|wednesday|"
              r"thursday|friday|saturday|sunday|spring|summer|autumn|fall|winter)|"
              r"this (?:morning|afternoon|evening|week)|today|tonight|earlier today|"
              r"on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|\w+ ago")
_PAST_VERB = (r"\w+ed|had|was|were|got|went|ran|broke|won|lost|made|took|gave|came|saw|met|"
              r"began|became|bought|sold|left|told|found|fell|flew|wrote|drove|passed away|"
              r"went down|spoke|sent|held|threw|caught|hit|paid|quit|shut")
_FACT_SLOTS = (r"deadline|due date|budget|launch date|release date|go-live date|meeting|standup|"
               r"stand-up|address|phone number|email(?: address)?|time ?zone|birthday|"
               r"anniversary|team size|office|headcount|price|rate|plan|contract")
_PEOPLE = (r"wife|husband|partner|son|daughter|mother|father|mom|dad|sister|brother|boss|"
           r"manager|dog|cat|kid|kids|children")
_EVENT_VERBS = (r"went to|visited|attended|moved to|moved into|started|finished|graduated|"
                r"got married|got engaged|got promoted|launched|shipped|released|bought|sold|"
                r"adopted|joined|left|quit|completed|traveled to|travelled to|signed|hired|"
                r"fired|lost|won|met|celebrated|ran a|ran the|hosted|presented|published")

#: In priority order: the first rule that matches a sentence decides its type.
RULES: tuple[Rule, ...] = (
    Rule(MemoryType.TODO, _r(r"^(?:to-?do|action items?(?: for \w+)?|task|note to self)\s*:"
                             r"\s*(?P<v>.+)")),
    Rule(MemoryType.DECISION, _r(r"^(?:decision|final (?:call|decision)|decided)\s*:\s*(?P<v>.+)"),
         "decision"),
    Rule(MemoryType.GOAL, _r(r"^(?:goal|objective)\s*:\s*(?P<v>.+)")),
    Rule(MemoryType.PREFERENCE, _r(r"^preference\s*:\s*(?P<v>.+)")),
    Rule(MemoryType.FACT, _r(r"^fact\s*:\s*(?P<v>.+)")),
    Rule(MemoryType.TODO, _r(r"\bremind me to (?P<v>.+)")),
    Rule(MemoryType.TODO, _r(r"\bdon'?t (?:let me )?forget (?:to |about )?(?P<v>.+)")),
    Rule(MemoryType.TODO, _r(r"^add (?P<v>.+) to (?:my|the|our) (?:task|to-?do|todo) list")),
    Rule(MemoryType.IDENTITY, _r(r"\bmy (?:full |first |last )?name is " + _NAME),
         "identity:name"),
    Rule(MemoryType.IDENTITY, _r(r"\bmy nickname is " + _NAME), "identity:nickname"),
    Rule(MemoryType.IDENTITY, _r(r"\b(?:you can )?call me " + _NAME), "identity:name"),
    Rule(MemoryType.IDENTITY, _r(r"\bmy pronouns are (?P<v>.+)"), "identity:pronouns"),
    Rule(MemoryType.IDENTITY, _r(rf"\b{_I_AM} (?P<v>\d{{1,3}}) years? old"), "identity:age"),
    Rule(MemoryType.IDENTITY, _r(r"\bi (?:live|reside) in (?P<v>.+)"), "identity:location"),
    Rule(MemoryType.IDENTITY, _r(rf"\b{_I_AM} (?:based|located) in (?P<v>.+)"),
         "identity:location"),
    Rule(MemoryType.IDENTITY, _r(rf"\b{_I_AM} (?:originally )?from (?P<v>.+)"),
         "identity:origin"),
    Rule(MemoryType.IDENTITY, _r(r"\bi work (?:as|at|for) (?P<v>.+)"), "identity:work"),
    Rule(MemoryType.IDENTITY,
         _r(rf"\b{_I_AM} (?:an?|the) (?P<v>(?:[\w-]+ ){{0,3}}(?:{_ROLE_WORDS}))\b"),
         "identity:role"),
    Rule(MemoryType.IDENTITY,
         re.compile(rf"\b(?i:{_I_AM}) (?P<v>[A-Z][a-z]+)(?=\s*(?:[,.!]|$|\band\b|by the way))")),
    Rule(MemoryType.FACT, _r(rf"\b{_I_AM} (?:allergic|intolerant) to (?P<v>.+)"), "allergy"),
    Rule(MemoryType.FACT,
         _r(rf"\b{_I_AM} (?:\w+ )?(?P<v>intolerant|allergic|diabetic|pregnant|colou?rblind|"
            r"asthmatic|epileptic|celiac|coeliac)\b")),
    Rule(MemoryType.FACT, _r(r"\bi take (?P<v>\d+ ?(?:mg|ml|mcg|g|iu)\b.+)")),
    Rule(MemoryType.DECISION,
         _r(r"\b(?:we|i)(?:'ve| have)? (?:just |finally |all )?(?:decided|agreed|chose|chosen|"
            r"settled|opted|committed|picked|selected|voted)(?: to| on| that| for)? (?P<v>.+)"),
         "decision"),
    Rule(MemoryType.DECISION,
         _r(r"\b(?:we|i)(?:'re| are|'m| am) (?:going|gonna go) with (?P<v>.+)"), "decision"),
    Rule(MemoryType.DECISION, _r(r"\b(?:the team|the board|everyone) (?:voted|agreed|decided) "
                                 r"(?:to |on |that )?(?P<v>.+)"), "decision"),
    Rule(MemoryType.DECISION, _r(r"(?P<v>.+?),? that'?s final\b"), "decision"),
    Rule(MemoryType.DECISION, _r(r"\blet'?s (?:go with|use|stick with|pick|choose) (?P<v>.+)"),
         "decision"),
    Rule(MemoryType.DECISION,
         _r(r"\b(?:we|i)(?:'ll| will) (?:go with|stick with|standardi[sz]e on) (?P<v>.+)"),
         "decision"),
    Rule(MemoryType.DECISION, _r(r"\bthe (?:final )?decision is (?:to )?(?P<v>.+)"), "decision"),
    Rule(MemoryType.GOAL,
         _r(r"\b(?:my|our) (?:main |primary |big |long-term |overall )?"
            r"(?:goal|aim|objective|target|ambition|dream) (?:\w+ ){0,4}?(?:is|are) "
            r"(?:to )?(?P<v>.+)")),
    Rule(MemoryType.GOAL,
         _r(r"\b(?:i|we)(?:'d| would)? (?:really |still )?(?:want|like|hope|aspire|plan|intend|"
            r"aim) to (?!(?:know|ask|see|check|say|tell|understand|talk|hear|chat|clarify|"
            r"confirm|mention|add|point out|go over|recap)\b)(?P<v>.+)")),
    Rule(MemoryType.GOAL, _r(rf"\b(?:{_I_AM}|we(?:'re| are)) (?:trying|working|hoping|aiming|"
                             r"planning|striving) (?:to|towards|toward|for) (?P<v>.+)")),
    Rule(MemoryType.TODO,
         _r(r"\b(?:i|we) (?:still |really |also |just )?(?:(?:need|have|must|got) to|gotta) "
            r"(?!(?:go|leave|run|say|admit|agree|ask|be honest|hang up|sign off|think)\b)"
            r"(?P<v>\w+ \w+.*)")),
    Rule(MemoryType.TODO, _r(r"^(?:gotta|got to|have to|need to) (?!go\b|run\b)(?P<v>\w+ \w+.*)")),
    Rule(MemoryType.TODO, _r(r"\b(?:i|we) (?:should|must) (?P<v>\w+ \w+.*)")),
    Rule(MemoryType.PREFERENCE,
         _r(r"\bmy (?:all-time |absolute )?favou?rite (?P<s>[\w ]{1,30}?) (?:is|are|has to be) "
            r"(?P<v>.+)"), "favorite:{s}"),
    Rule(MemoryType.PREFERENCE,
         _r(r"\bi (?:really |much |strongly |generally |usually |always |definitely |still )?"
            r"(?:prefer|favou?r)\b (?P<v>.+)"), "prefer"),
    Rule(MemoryType.PREFERENCE, _r(r"\bi'?d rather (?P<v>.+)"), "prefer"),
    Rule(MemoryType.PREFERENCE, _r(r"^(?:please\s+)?(?:always|never)\s+(?P<v>\w+ .+)"),
         "instruction"),
    Rule(MemoryType.PREFERENCE,
         _r(r"\b(?:from now on|going forward|in future|in the future)\b,?\s*(?P<v>.+)"),
         "instruction"),
    Rule(MemoryType.PREFERENCE,
         _r(r"^(?:please\s+)?(?:keep|make) (?:your |the )?(?P<v>(?:answers|replies|responses|"
            r"messages|emails|summaries)\b.+)"), "instruction"),
    Rule(MemoryType.PREFERENCE,
         _r(r"^(?:please\s+)?(?:don'?t|do not|never) (?:ever )?(?P<v>(?:use|send|include|add|"
            r"call|cc|mention|reply|write)\b.+)"), "instruction"),
    Rule(MemoryType.PREFERENCE,
         _r(r"\bi (?:really |just |honestly )?(?:do not|don't|never|no longer|can't|cannot) "
            r"(?:really )?(?:like|enjoy|stand|eat|drink)\b (?P<o>[\w' -]{1,40}?)(?P<v>)"
            r"(?:\s+(?:anymore|any more|at all|either))?$"), "like:{o}"),
    Rule(MemoryType.PREFERENCE,
         _r(rf"\b{_I_AM} (?:a )?(?:huge |big |massive |real )?fan of (?P<v>.+)")),
    Rule(MemoryType.PREFERENCE, _r(r"(?P<v>.+) is my (?:all-time )?favou?rite\b")),
    Rule(MemoryType.PREFERENCE,
         _r(r"\bi (?:really |absolutely |totally |kind of |do )?(?:like|love|enjoy|adore)\b "
            r"(?!to\b)(?P<o>[\w' -]{1,40}?)(?P<v>)$"), "like:{o}"),
    Rule(MemoryType.PREFERENCE,
         _r(r"\bi (?:really |just |honestly )?(?:like|love|enjoy|adore|hate|dislike|detest|"
            r"avoid|don't like|do not like)\b (?P<v>.+)")),
    Rule(MemoryType.IDENTITY,
         _r(rf"\bmy (?P<s>{_PEOPLE})(?:'s name)? is (?:called |named )?(?P<v>.+)"), "family:{s}"),
    Rule(MemoryType.IDENTITY,
         _r(rf"\bi have (?P<v>(?:a|an|one|two|three|four|five|\d+) (?:\w+ )?(?:{_PEOPLE}|"
            r"sons?|daughters?|dogs?|cats?|pets?|brothers?|sisters?|grandchildren))\b"),
         "family"),
    Rule(MemoryType.FACT,
         _r(rf"\b(?:the|our|my) (?P<s>(?:\w+ )?(?:{_FACT_SLOTS}))(?: for [\w ]{{1,30}}?)? "
            r"(?:is|are|was|has been|will be|moved to|changed to|got moved to) (?P<v>.+)"),
         "fact:{s}"),
    Rule(MemoryType.FACT,
         _r(r"\b(?:the|our|my) (?P<s>\w+(?: \w+)?) (?:is|are) (?:due|scheduled|set|planned"
            r"|booked) (?:for|on|at|to|by) (?P<v>.+)"), "fact:{s}"),
    Rule(MemoryType.FACT,
         _r(r"\b(?:the|our|my) (?P<s>[\w' -]{2,40}?) (?:ends|expires|renews|starts|begins|opens|"
            r"closes|departs|leaves|arrives|lands) (?:on|at|in|by) (?P<v>.+)"), "fact:{s}"),
    Rule(MemoryType.FACT,
         _r(r"\b(?:the|our|my) (?P<s>[\w' -]{2,40}?) (?:runs on|is hosted on|is hosted at|"
            r"is built (?:on|with)|is written in|is deployed (?:on|to)|lives on|uses) (?P<v>.+)"),
         "fact:{s}"),
    Rule(MemoryType.FACT,
         _r(r"\b(?:the|our|my) (?P<s>[\w' -]{2,40}?) (?:is|are) (?P<v>(?:about |around |roughly |"
            r"only |just )?[$€£]?\d.*)"), "fact:{s}"),
    Rule(MemoryType.FACT, _r(r"\bi (?:drive|own|ride) (?P<v>(?:a|an|the|two|\d+) .+)")),
    Rule(MemoryType.EVENT,
         _r(rf"\b(?:i|we) (?:just |recently |finally |already )?(?:{_EVENT_VERBS})\b(?P<v>.*)")),
    Rule(MemoryType.EVENT,
         _r(rf"(?=.*\b(?:{_PAST_TIME})\b)(?=.*\b(?:{_PAST_VERB})\b)(?P<v>.+)")),
    Rule(MemoryType.FACT,
         _r(r"^my (?P<s>(?!head|mind|problem|question|point|concern|issue|guess|bad|pleasure|"
            r"turn|fault|apologies)[\w' -]{2,30}?) (?:is|are) (?P<v>.+)"), "fact:{s}"),
)

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


def classify(sentence: str, *, stated: bool) -> Candidate | None:
    """The candidate one sentence yields, or None (question, request, chatter, no rule)."""
    text = sentence.strip().replace("\u2019", "'").replace("\u2018", "'")
    if len(text) < 3 or text.endswith("?") or _CHATTER.match(text):
        return None
    if _QUESTION_START.match(text) or _REQUEST.match(text):
        return None
    core = text.rstrip(".!")
    for rule in RULES:
        match = rule.pattern.search(core)
        if match is None:
            continue
        hedged = bool(_HEDGE.search(text))
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
    return None


def subject_of(memory_type: MemoryType, content: str) -> tuple[str | None, str | None]:
    """Subject and value of a memory given in full (explicit or from a workflow), if any."""
    candidate = classify(content, stated=False)
    if candidate is None or candidate.type != memory_type:
        return None, None
    return candidate.subject, candidate.value


# ---------------------------------------------------------------------------- documents

_HEADING = re.compile(r"^(#{1,6})\s+(?P<t>.+?)\s*#*$")
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


def _section_type(heading: str) -> MemoryType | None:
    for pattern, memory_type in _SECTION_TYPES:
        if pattern.search(heading):
            return memory_type
    return None


def _from_item(text: str, section: MemoryType | None) -> Candidate | None:
    found = classify(text, stated=False)
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


def extract_document(text: str) -> list[Candidate]:
    """Candidates from a Markdown or plain-text document (see the module docstring)."""
    out: list[Candidate] = []
    section: MemoryType | None = None
    paragraph: list[str] = []

    def flush() -> None:
        if not paragraph:
            return
        block = " ".join(paragraph).strip()
        paragraph.clear()
        typed = [c for c in (classify(s, stated=False) for s in split_sentences(block)) if c]
        if typed:
            out.extend(typed)
        elif section is not None:
            out.append(replace(_observation(block), type=section,
                               importance=IMPORTANCE[section], confidence=DOCUMENT_CONFIDENCE))
        elif len(block) >= 12:
            out.append(_observation(block[:4000]))

    for line in text.splitlines():
        if not line.strip():
            flush()
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            section = _section_type(heading.group("t"))
            continue
        box = _CHECKBOX.match(line)
        if box:
            flush()
            item = box.group("t").strip()
            if box.group("x") == " ":
                out.append(Candidate(type=MemoryType.TODO, content=item,
                                     importance=IMPORTANCE[MemoryType.TODO],
                                     confidence=DOCUMENT_CONFIDENCE))
            else:
                out.append(Candidate(type=MemoryType.EVENT, content=f"Done: {item}",
                                     importance=IMPORTANCE[MemoryType.EVENT],
                                     confidence=DOCUMENT_CONFIDENCE))
            continue
        item_match = _LIST_ITEM.match(line)
        if item_match:
            flush()
            candidate = _from_item(item_match.group("t").strip(), section)
            out.append(candidate or _observation(item_match.group("t").strip()))
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
