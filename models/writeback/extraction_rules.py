"""The rule table of the rules-first extractor: which sentence is which memory type.

Every rule is linear in the text it reads. Most patterns start with a keyword
(``\\bmy name is``, ``^goal:``) and read a bounded stretch or the rest of the line
after it, so ``pattern.search`` tries each position once, cheaply. Three patterns put
their value *before* the keyword or use look-aheads over the whole line ("Postgres,
that's final", "Lisbon is my favourite city", a past time and a past verb anywhere on
the line); searched from every position, each of those reads the rest of the line
from every position: quadratic. Those rules carry a ``start`` function that finds, in
one linear pass, the only position where ``search`` could return a match; the pattern
is then matched there once (:meth:`Rule.find`), which gives exactly the match that
``search`` would have found.

Six rules are linear but slow on text dense with their first words: after every "the",
"our" or "my" (or "I am a") they try a stretch of up to 40 characters or three words.
They carry ``needs``, the part of their pattern that follows that stretch ("ends on",
"is hosted on", a role word): every match contains it, so a text without it is not
searched at all. Both devices change how long a rule takes, never what it finds (the
unit tests compare ``find`` with ``pattern.search`` on generated text).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from orchmem.models.core.shapes import MemoryType

#: Finds where a rule's match must start, or None when the text holds no match.
StartFinder = Callable[[str], int | None]


@dataclass(frozen=True)
class Rule:
    type: MemoryType
    pattern: re.Pattern[str]
    #: The subject: a fixed slot name, or a format over the match's groups.
    subject: str | None = None
    #: For patterns that would be quadratic under ``search``: where the match starts.
    start: StartFinder | None = None
    #: A part of the pattern every match contains, searched first (far quicker).
    needs: re.Pattern[str] | None = None

    def find(self, text: str) -> re.Match[str] | None:
        """The match ``pattern.search(text)`` returns, found in time linear in ``text``."""
        if self.needs is not None and self.needs.search(text) is None:
            return None
        if self.start is None:
            return self.pattern.search(text)
        at = self.start(text)
        return None if at is None else self.pattern.match(text, at)


def _r(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _line_start(text: str, at: int) -> int:
    return text.rfind("\n", 0, at) + 1


def value_before(keyword: str) -> StartFinder:
    """Start of ``(?P<v>.+?)KEYWORD`` or ``(?P<v>.+)KEYWORD`` under ``search``.

    ``.`` stops at a newline, so such a match begins at the start of the first line in
    which the keyword occurs after at least one character of that line.
    """
    compiled = _r(keyword)

    def start(text: str) -> int | None:
        found = compiled.search(text)
        while found is not None:
            line = _line_start(text, found.start())
            if found.start() > line:
                return line
            found = compiled.search(text, found.start() + 1)
        return None

    return start


def on_one_line(*needles: str) -> StartFinder:
    """Start of ``(?=.*A)(?=.*B)(?P<v>.+)`` under ``search``: the first line holding all
    the needles (none of which can match a newline)."""
    compiled = [_r(needle) for needle in needles]

    def start(text: str) -> int | None:
        offset = 0
        for line in text.split("\n"):
            if line and all(needle.search(line) for needle in compiled):
                return offset
            offset += len(line) + 1
        return None

    return start


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
_FINAL = r",? that'?s final\b"
_FAVOURITE = r" is my (?:all-time )?favou?rite\b"
_WHEN_PAST = rf"\b(?:{_PAST_TIME})\b"
_DID_PAST = rf"\b(?:{_PAST_VERB})\b"
_A_ROLE = rf"(?:{_ROLE_WORDS})\b"
_SLOT_TAIL = (r"(?: for [\w ]{1,30}?)? "
              r"(?:is|are|was|has been|will be|moved to|changed to|got moved to) ")
_IS_SCHEDULED = r" (?:is|are) (?:due|scheduled|set|planned|booked) (?:for|on|at|to|by) "
_ENDS_ON = (r" (?:ends|expires|renews|starts|begins|opens|closes|departs|leaves|arrives|lands)"
            r" (?:on|at|in|by) ")
_RUNS_ON = (r" (?:runs on|is hosted on|is hosted at|is built (?:on|with)|is written in|"
            r"is deployed (?:on|to)|lives on|uses) ")
_IS_NUMBER = r" (?:is|are) (?:about |around |roughly |only |just )?[$€£]?\d"
#: Someone other than the speaker, named at the start of a sentence: "The customer",
#: "My manager", "Sarah", "She" (one to three words; never "it", "this", "what"...).
_WHO = (r"(?P<who>(?!(?:it|this|that|there|here|what|which|who|whoever|nobody|no one|"
        r"everyone|everybody|anyone|i|you)\b)(?:[\w'-]+ ){0,2}?[\w'-]+)")
#: The user as a note calls them: "The user prefers ...", or no one at all ("Prefers tea").
_THE_USER = r"(?:(?:the )?user )?"
_OFTEN = r"(?:really |usually |generally |always |strongly |still |much |definitely |also )?"
_PREFERS = r"(?:prefers|favou?rs|would rather|'d rather)\b"
_LIKES = (r"(?:likes|loves|enjoys|adores|hates|dislikes|detests|can't stand|cannot stand|"
          r"does(?:n't| not) like|is (?:a )?(?:huge |big )?fan of)\b")

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
         "identity:role", needs=_r(_A_ROLE)),
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
    Rule(MemoryType.DECISION, _r(rf"(?P<v>.+?){_FINAL}"), "decision", value_before(_FINAL)),
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
    Rule(MemoryType.PREFERENCE, _r(rf"^{_THE_USER}{_OFTEN}{_PREFERS} (?P<v>.+)"), "prefer"),
    Rule(MemoryType.PREFERENCE, _r(rf"^{_WHO} {_OFTEN}{_PREFERS} (?P<v>.+)"), "prefer:{who}"),
    Rule(MemoryType.PREFERENCE, _r(rf"^(?:{_WHO} )?{_OFTEN}{_LIKES} (?P<v>.+)")),
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
    Rule(MemoryType.PREFERENCE, _r(rf"(?P<v>.+){_FAVOURITE}"), None, value_before(_FAVOURITE)),
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
         _r(rf"\b(?:the|our|my) (?P<s>(?:\w+ )?(?:{_FACT_SLOTS})){_SLOT_TAIL}(?P<v>.+)"),
         "fact:{s}", needs=_r(rf"(?:{_FACT_SLOTS}){_SLOT_TAIL}")),
    Rule(MemoryType.FACT, _r(rf"\b(?:the|our|my) (?P<s>\w+(?: \w+)?){_IS_SCHEDULED}(?P<v>.+)"),
         "fact:{s}", needs=_r(_IS_SCHEDULED)),
    Rule(MemoryType.FACT, _r(rf"\b(?:the|our|my) (?P<s>[\w' -]{{2,40}}?){_ENDS_ON}(?P<v>.+)"),
         "fact:{s}", needs=_r(_ENDS_ON)),
    Rule(MemoryType.FACT, _r(rf"\b(?:the|our|my) (?P<s>[\w' -]{{2,40}}?){_RUNS_ON}(?P<v>.+)"),
         "fact:{s}", needs=_r(_RUNS_ON)),
    Rule(MemoryType.FACT,
         _r(r"\b(?:the|our|my) (?P<s>[\w' -]{2,40}?) (?:is|are) (?P<v>(?:about |around |"
            r"roughly |only |just )?[$€£]?\d.*)"), "fact:{s}", needs=_r(_IS_NUMBER)),
    Rule(MemoryType.FACT, _r(r"\bi (?:drive|own|ride) (?P<v>(?:a|an|the|two|\d+) .+)")),
    Rule(MemoryType.EVENT,
         _r(rf"\b(?:i|we) (?:just |recently |finally |already )?(?:{_EVENT_VERBS})\b(?P<v>.*)")),
    Rule(MemoryType.EVENT, _r(rf"(?=.*{_WHEN_PAST})(?=.*{_DID_PAST})(?P<v>.+)"), None,
         on_one_line(_WHEN_PAST, _DID_PAST)),
    Rule(MemoryType.FACT,
         _r(r"^my (?P<s>(?!head|mind|problem|question|point|concern|issue|guess|bad|pleasure|"
            r"turn|fault|apologies)[\w' -]{2,30}?) (?:is|are) (?P<v>.+)"), "fact:{s}"),
)
