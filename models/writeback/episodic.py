"""Episodic capture: one extractive summary of a transcript's exchange (rules, no model).

With ``memory.writeback.episodic_summary`` on, a write-back with a ``channelTranscript``
stores, besides the statements extracted from the user's messages, one memory of the
exchange itself: what the user said and what the assistant answered, in their own
words, so that "what did we talk about on Tuesday" has something to find.

The summary is extractive and deterministic. Each side (the user's messages, the
assistant's) gives its key lines, in the order they were said:

1. the first sentence of each of its messages that is not small talk ("Hi!",
   "Thanks", "Sure"): what the message was about;
2. then, while room is left, the other sentences that carry a date, a number or a
   name (a capitalised word inside the sentence): the details a later question names.

A side whose messages are all small talk gives its first sentence. The user's side may
use half of ``max_chars`` (less the labels); the assistant's side the rest. A line
that does not fit is cut at a word and ends with "…". System and tool messages are
left out, and a transcript without both a user's and an assistant's message has no
exchange to summarise (None).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from orchmem.models.writeback.extraction import Message, split_sentences

#: The roles whose lines a summary quotes, in this order, with their default labels.
SIDES: dict[str, str] = {"user": "user", "assistant": "assistant"}
ELLIPSIS = "\u2026"
#: A sentence of small talk only: greetings, thanks, acknowledgements.
_SMALL_TALK = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|thx|ok|okay|sure|great|cool|nice|lol|haha|bye|"
    r"good (?:morning|night|evening|afternoon)|yes|no|yep|nope|alright|got it|i see|"
    r"sounds good|perfect|awesome|wow|you're welcome|no problem|of course|glad to help|"
    r"congrats|congratulations|noted|done|will do)"
    r"\b[\s\w]{0,12}[!.,]*$", re.IGNORECASE)
#: A detail worth keeping: a capitalised word after the sentence's first word (a name),
#: a digit, a month or a weekday.
_CAPITALISED = re.compile(r"(?<=\s)[A-Z][a-z]")
_DATEISH = re.compile(
    r"\d|\b(?:january|february|march|april|may|june|july|august|september|october|"
    r"november|december|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday|today|yesterday|tomorrow|tonight)\b",
    re.IGNORECASE)
_BLANKS = re.compile(r"\s+")


def summarize_exchange(messages: Sequence[Message], max_chars: int,
                       labels: Mapping[str, str] | None = None) -> str | None:
    """The summary of ``messages`` ("user: ...\\nassistant: ..."), or None when they hold
    no exchange (see the module). ``labels`` names the sides (default: their roles).
    The result is at most ``max_chars`` characters long."""
    named = {**SIDES, **(labels or {})}
    said: dict[str, list[list[str]]] = {role: [] for role in SIDES}
    for message in messages:
        if message.role in said:
            sentences = [_BLANKS.sub(" ", s).strip() for s in split_sentences(message.text)]
            if any(sentences):
                said[message.role].append([s for s in sentences if s])
    if not all(said.values()):
        return None
    frame = sum(len(named[role]) + 2 for role in SIDES) + 1  # "label: " and the newline
    room = max(max_chars - frame, 2 * len(ELLIPSIS))
    user = key_lines(said["user"], room // 2)
    assistant = key_lines(said["assistant"], room - len(user) - 1)
    return f"{named['user']}: {user}\n{named['assistant']}: {assistant}"[:max_chars]


def key_lines(messages: Sequence[Sequence[str]], budget: int) -> str:
    """The key sentences of one side's messages (lists of sentences), joined by spaces,
    in at most ``budget`` characters."""
    firsts = [(m, next((i for i, s in enumerate(sentences) if not _SMALL_TALK.match(s)),
                       None)) for m, sentences in enumerate(messages)]
    chosen = [(m, i) for m, i in firsts if i is not None]
    if not chosen:
        chosen = [(0, 0)]
    picked: set[tuple[int, int]] = set()
    used = -1
    for m, i in chosen:
        cost = len(messages[m][i]) + 1
        if picked and used + cost > budget:
            break
        picked.add((m, i))
        used += cost
    for m, sentences in enumerate(messages):
        for i, sentence in enumerate(sentences):
            if used + len(sentence) + 1 > budget or (m, i) in picked:
                continue
            if _is_detail(sentence) and not _SMALL_TALK.match(sentence):
                picked.add((m, i))
                used += len(sentence) + 1
    text = " ".join(messages[m][i] for m, i in sorted(picked))
    return cut(text, budget)


def _is_detail(sentence: str) -> bool:
    return bool(_DATEISH.search(sentence) or _CAPITALISED.search(sentence))


def cut(text: str, budget: int) -> str:
    """``text`` in at most ``budget`` characters: cut at a word, ending with "…"."""
    if len(text) <= budget:
        return text
    head = text[: max(budget - len(ELLIPSIS), 0)]
    if " " in head.strip():
        head = head[: head.rstrip().rfind(" ")]
    return head.rstrip(" ,;:") + ELLIPSIS
