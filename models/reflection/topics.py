"""Topics: which memories are about the same thing. Rules first, then embedding clusters.

A topic is a plain string kept beside the memory (``memory_topics``; ``topic`` in its JSON):

1. **Rules.** A memory whose extractor filled an exclusive slot (``subject``,
   models/writeback/extraction.py) belongs to that slot's topic: ``subject:identity:location``,
   ``subject:allergy``, ``subject:like:coffee``. The broad slots ``prefer``,
   ``decision`` and ``instruction`` (and a named person's ``prefer:customer``) say too
   little on their own (see :func:`orchmem.models.writeback.reconcile.broad`) and go to step 2.
2. **Clusters.** The others are taken oldest first (``createdAt``, then memoryId); each
   joins the topic of the first earlier cluster leader whose vector is at cosine >=
   ``memory.reflect.topic_similarity``, or starts a topic of its own and leads it.
   A cluster's name is ``about:<two words of its leader>#<4 hex of the leader's id>``.

:func:`assign` is a pure function of the units it is given: the same database gives the
same topics, whatever order the rows were read in. A memory without a vector (not
embedded yet) and without a subject has no topic until it has one.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from orchmem.models.writeback.reconcile import broad

SUBJECT_PREFIX = "subject:"
CLUSTER_PREFIX = "about:"
_WORD = re.compile(r"[a-z][a-z'-]{2,}")
#: Words too common to name a topic.
STOPWORDS = frozenset("""
the and for with that this from have has had was were are will would could should not
you your yours our ours their they them she her his him its it's i'm i've i'd i'll
about into over under after before than then when what which who whom whose where why
how all any some more most much many very just also only really still even can cannot
been being does did doing done like likes liked want wants wanted need needs there here
prefer prefers preferred user user's we're we've don't didn't doesn't isn't wasn't
now today yesterday tomorrow always never every each one two three new old
""".split())


@dataclass(frozen=True)
class Unit:
    """One active memory as topic assignment sees it."""

    memory_id: str
    content: str
    subject: str | None
    created_at: str
    vector: np.ndarray | None = None


#: Words of time an extractor's slot name may carry ("the service now runs ..." gives the
#: slot "fact:service now"): not part of what the slot is about.
TIME_WORDS = frozenset({"now", "currently", "still", "today", "anymore", "also", "again"})


def rule_topic(subject: str | None) -> str | None:
    """The topic an extractor's slot names, or None for no slot or a broad one."""
    if not subject or broad(subject):
        return None
    kind, colon, rest = subject.partition(":")
    if colon:
        kept = " ".join(w for w in rest.split() if w not in TIME_WORDS)
        subject = f"{kind}:{kept or rest}"
    return SUBJECT_PREFIX + subject


def label(content: str, memory_id: str) -> str:
    """A cluster's name from its leader: its two most frequent content words (ties by
    first use) and four hex digits of its memoryId, so two clusters never share one."""
    words = [w for w in _WORD.findall(content.casefold()) if w not in STOPWORDS]
    top = [w for w, _ in Counter(words).most_common(2)] or ["misc"]
    tag = hashlib.blake2b(memory_id.encode(), digest_size=2).hexdigest()
    return f"{CLUSTER_PREFIX}{'-'.join(top)}#{tag}"


def assign(units: Sequence[Unit], similarity: float) -> dict[str, str | None]:
    """The topic of every unit (memoryId -> topic, None when it cannot have one yet)."""
    ordered = sorted(units, key=lambda u: (u.created_at, u.memory_id))
    topics: dict[str, str | None] = {}
    clustered = [u for u in ordered if rule_topic(u.subject) is None and u.vector is not None]
    leaders: list[str] = []
    matrix = np.zeros((len(clustered), _dim(clustered)), dtype=np.float32)
    for unit in ordered:
        by_rule = rule_topic(unit.subject)
        if by_rule is not None or unit.vector is None:
            topics[unit.memory_id] = by_rule
            continue
        if leaders:
            cosines = matrix[: len(leaders)] @ unit.vector
            best = int(np.argmax(cosines))
            if float(cosines[best]) >= similarity:
                topics[unit.memory_id] = topics[leaders[best]]
                continue
        matrix[len(leaders)] = unit.vector
        leaders.append(unit.memory_id)
        topics[unit.memory_id] = label(unit.content, unit.memory_id)
    return topics


def _dim(units: Sequence[Unit]) -> int:
    return int(units[0].vector.shape[0]) if units and units[0].vector is not None else 0
