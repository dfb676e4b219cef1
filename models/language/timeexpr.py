"""Dates in words, resolved by rules against an anchor time (no model, no network).

"yesterday", "last week", "next Friday", "last Tues", "two days ago", "two weekends ago",
"in May 2023", "on 8 May 2023", "2023-05-08", "last year" (and, in a question, "in June":
the last June begun) are turned into closed day ranges ``[start, end]`` (dates,
both inclusive) against an anchor: for a memory its validFrom (when it was said), for a
query the clock of the recall. A phrase the rules do not know is left alone; nothing
is guessed. Weeks start on Monday. "next Friday" is the first Friday after the anchor
day, "last Friday" the last one before it, a bare "Friday" in a past-tense statement is
left alone (it could be either).

:func:`resolve` finds every phrase in a text; :func:`window` joins the ranges of a
query into one, which recall uses to filter or boost (models/recall/router.py).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

#: Characters of a text the rules look at (a memory's content can be long; the
#: phrases that date it come early in practice, and the scan must stay cheap).
MAX_SCAN_CHARS = 4000

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS.pop("may", None)
_MONTHS["may"] = 5
_DAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
#: Short weekday names as people write them ("last Tues"); "Sat" and "Sun" are left out
#: (also words: "the last sat down").
_DAYS |= {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "weds": 2, "thu": 3, "thur": 3,
          "thurs": 3, "fri": 4}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3,
            "couple of": 2, "few": 3}
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY_RE = "|".join(sorted(_DAYS, key=len, reverse=True))
_NUM_RE = r"\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True))
_UNIT_RE = r"days?|weekends?|weeks?|months?|years?"


@dataclass(frozen=True, slots=True)
class TimeRef:
    """A phrase of a text and the days it names (inclusive)."""

    text: str
    start: date
    end: date

    def dump(self) -> dict[str, str]:
        return {"text": self.text, "from": self.start.isoformat(), "to": self.end.isoformat()}


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _shift_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _week(day: date) -> tuple[date, date]:
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def _relative_span(unit: str, count: int, anchor: date, sign: int) -> tuple[date, date]:
    """The day (or week, month, year) ``count`` units before (sign -1) or after the anchor."""
    unit = unit.rstrip("s")
    if unit == "day":
        day = anchor + timedelta(days=sign * count)
        return day, day
    if unit == "week":
        return _week(anchor + timedelta(weeks=sign * count))
    if unit == "weekend":
        # The coming weekend is the first ahead ("in 1 weekend" = "this weekend"); the
        # first behind is the one of the week before ("a weekend ago" = "last weekend").
        weeks = sign * count if sign < 0 else count - 1
        saturday = _week(anchor + timedelta(weeks=weeks))[0] + timedelta(days=5)
        return saturday, saturday + timedelta(days=1)
    if unit == "month":
        first = _shift_months(anchor.replace(day=1), sign * count)
        return first, _month_end(first.year, first.month)
    year = anchor.year + sign * count
    return date(year, 1, 1), date(year, 12, 31)


def _rule_simple(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    word = m.group(0).lower()
    if word == "today" or word == "tonight" or word == "this morning":
        return anchor, anchor
    if word == "yesterday" or word == "last night":
        day = anchor - timedelta(days=1)
        return day, day
    if word == "tomorrow":
        day = anchor + timedelta(days=1)
        return day, day
    return None


def _rule_this_last_next(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    which, unit = m.group("which").lower(), m.group("unit").lower()
    sign = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[which]
    if unit in _DAYS:
        delta = (_DAYS[unit] - anchor.weekday()) % 7
        if sign < 0:
            delta = delta - 7 if delta else -7
        elif sign > 0:
            delta = delta or 7
        day = anchor + timedelta(days=delta)
        return day, day
    if unit == "weekend":
        # "this weekend": the Saturday and Sunday of the anchor's week; last/next: a week off.
        saturday = _week(anchor)[0] + timedelta(days=5 + 7 * sign)
        return saturday, saturday + timedelta(days=1)
    return _relative_span(unit, abs(sign), anchor, -1 if sign < 0 else 1)


def _rule_ago(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    return _relative_span(m.group("unit").lower(), _number(m.group("n")), anchor, -1)


def _rule_in_n(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    return _relative_span(m.group("unit").lower(), _number(m.group("n")), anchor, 1)


def _rule_day_month_year(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    month = _MONTHS[m.group("month").lower()]
    year = int(m.group("year")) if m.group("year") else anchor.year
    try:
        day = date(year, month, int(m.group("day")))
    except ValueError:
        return None
    return day, day


def _rule_month_year(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    month = _MONTHS[m.group("month").lower()]
    year = int(m.group("year"))
    return date(year, month, 1), _month_end(year, month)


def _rule_bare_month(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    """A month without a year ("in June"): the last one that began on or before the
    anchor (a question asks about what has happened)."""
    month = _MONTHS[m.group("month").lower()]
    year = anchor.year if month <= anchor.month else anchor.year - 1
    return date(year, month, 1), _month_end(year, month)


def _rule_iso(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    try:
        day = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None
    return day, day


def _rule_year(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    year = int(m.group("year"))
    return date(year, 1, 1), date(year, 12, 31)


_RULES = tuple((re.compile(pattern, re.IGNORECASE), rule) for pattern, rule in (
    (r"\b(\d{4})-(\d{2})-(\d{2})\b", _rule_iso),
    (rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month>{_MONTH_RE})\b\.?,?"
     rf"(?:\s+(?P<year>(?:19|20)\d{{2}}))?", _rule_day_month_year),
    (rf"\b(?P<month>{_MONTH_RE})\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?"
     rf"(?:\s+(?P<year>(?:19|20)\d{{2}}))?\b", _rule_day_month_year),
    (rf"\b(?P<month>{_MONTH_RE})\.?,?\s+(?:of\s+)?(?P<year>(?:19|20)\d{{2}})\b",
     _rule_month_year),
    (r"\b(?:today|tonight|this morning|yesterday|last night|tomorrow)\b", _rule_simple),
    (rf"\b(?P<which>last|past|previous|this|next|coming)\s+(?P<unit>week|month|year|weekend|"
     rf"{_DAY_RE})\b", _rule_this_last_next),
    (rf"\b(?P<n>{_NUM_RE})\s+(?P<unit>{_UNIT_RE})\s+ago\b", _rule_ago),
    (rf"\bin\s+(?P<n>{_NUM_RE})\s+(?P<unit>{_UNIT_RE})\b", _rule_in_n),
    (r"\b(?:in|during|since|of|from)\s+(?P<year>(?:19|20)\d{2})\b", _rule_year),
))
#: Only for a question (:func:`resolve` with ``bare_months``): in a statement "in June"
#: can be ahead ("we're moving in June") as well as behind. A possessive is a name
#: ("in May's car", "in Jan's garden").
_BARE_MONTH = (re.compile(rf"\b(?:in|during)\s+(?:early\s+|late\s+|mid-?)?"
                          rf"(?P<month>{_MONTH_RE})\b(?!['\u2019]s\b|\.?,?\s*(?:\d|of\b))",
                          re.IGNORECASE),
               _rule_bare_month)


def _rule_bare_weekday(m: re.Match[str], anchor: date) -> tuple[date, date] | None:
    back = (anchor.weekday() - _DAYS[m.group("day").lower()]) % 7 or 7
    day = anchor - timedelta(days=back)
    return day, day


#: Only for a question in the past tense: "what did we talk about on Tuesday" is the last
#: Tuesday before the anchor; "what is on Tuesday" could be either, and is left alone.
_BARE_WEEKDAY = (re.compile(rf"\bon\s+(?P<day>{_DAY_RE})\b(?!['\u2019]s\b)", re.IGNORECASE),
                 _rule_bare_weekday)
_PAST_TENSE = re.compile(r"\b(?:did|was|were|had|happened|said|told|talked|discussed|spoke|"
                         r"went|met|asked|mentioned|decided|agreed)\b", re.IGNORECASE)


def resolve(text: str, anchor: datetime | date, *, bare_months: bool = False
            ) -> list[TimeRef]:
    """Every dated phrase of ``text`` with the days it names, in text order.

    Overlapping matches keep the first rule's (the more specific: a full date beats the
    year inside it). ``bare_months``: a month without a year ("in June") is the last one
    begun by the anchor, and in a past-tense question "on Tuesday" is the last Tuesday
    before it (for a question; a statement's could be ahead).
    """
    day = anchor.date() if isinstance(anchor, datetime) else anchor
    head = text[:MAX_SCAN_CHARS]
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, TimeRef]] = []
    rules = _RULES
    if bare_months:
        rules = (*rules, _BARE_MONTH)
        if _PAST_TENSE.search(head):
            rules = (*rules, _BARE_WEEKDAY)
    for pattern, rule in rules:
        for m in pattern.finditer(head):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            span = rule(m, day)
            # A phrase that names no real day ("31 February") is consumed all the same:
            # no later rule may read a part of it ("February 2023").
            taken.append((m.start(), m.end()))
            if span is None:
                continue
            found.append((m.start(), TimeRef(m.group(0).strip(" ,."), *span)))
    return [ref for _, ref in sorted(found, key=lambda pair: pair[0])]


def window(refs: list[TimeRef]) -> tuple[date, date] | None:
    """The smallest range holding every ref, or None when there are none."""
    if not refs:
        return None
    return min(r.start for r in refs), max(r.end for r in refs)
