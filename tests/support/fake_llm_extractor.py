"""A test double of an LLM extractor: the one piece that cannot run here.

It follows the extractor interface, ``(messages, kind) -> list[Candidate]``, and
"understands" a single phrasing the rules do not, so a test can tell that it, and not
the rules, produced the memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchmem.models.core.shapes import MemoryType
from orchmem.models.writeback.extraction import Candidate, Message

CALLS: list[tuple[int, str]] = []


def extract(messages: Sequence[Message], kind: str) -> list[Candidate]:
    CALLS.append((len(messages), kind))
    out = []
    for message in messages:
        if message.role == "user" and "fond of" in message.text:
            thing = message.text.split("fond of", 1)[1].strip(" .!")
            out.append(Candidate(type=MemoryType.PREFERENCE, content=f"Likes {thing}",
                                 importance=61, confidence=0.77, stated=True,
                                 subject=f"like:{thing.lower()}", value="like"))
    return out
