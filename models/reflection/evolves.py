"""Evolves proposals: how a newer memory may relate to an older one of the same topic.

Reflection looks at pairs (newer, older) of active units of one type in one topic, the
newer one recent (written since the last reflection), that no edge joins yet, and
proposes at most one relation per pair, from the first rule that matches. Events and
Observations are episodic (what happened, what was seen): a later one adds to an
earlier one and never replaces it, so they are not proposed.

=============  ==========================================================================
``replaces``   the same exclusive slot (``subject``) with another value, and the newer one
               was stated by the user with at least the older one's confidence; or the
               two are close (cosine >= ``CLOSE``) and the newer one says it changed
               ("now", "no longer", "instead", "switched", "moved", ...) while its numbers
               or its negation differ from the older one's
``challenges`` the same slot with another value otherwise; or close and disagreeing in
               numbers or negation, without a word of change
``refines``    close (cosine >= ``NEAR``), the newer one keeps nearly every word of the
               older one and adds some (a more precise restatement)
=============  ==========================================================================

Each proposal has a reason and a confidence in [0, 1]. Its fingerprint names the pair's
statements (type and normalized content of both): a rejected proposal keeps its row, so
the same pair is never proposed again, and a pair already proposed is not proposed
twice. :func:`propose` is pure; reflect.py stores what it returns.

Today's write-time policy stays as it is: a user's own restatement of an exclusive slot
supersedes the older memory at once (reconcile.py), and any other same-slot disagreement
becomes a Contradicts edge (a conflict insight). Those pairs are joined by an edge, so
reflection never proposes them again; proposals cover what write time could not see.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from orchmem.models.storage.reflection.units import StoredUnit
from orchmem.models.writeback.reconcile import broad

Relation = Literal["replaces", "challenges", "refines"]
RELATIONS: tuple[Relation, ...] = ("replaces", "challenges", "refines")
#: Cosine from which two memories of one topic can disagree about the same thing.
CLOSE = 0.72
#: Cosine from which a longer restatement is a refinement.
NEAR = 0.8
#: Share of the older memory's words a refinement keeps.
KEPT_WORDS = 0.8
#: Types that are never replaced: what happened, what was seen.
EPISODIC = frozenset({"Event", "Observation"})
#: Older memories looked at per recent one (the closest first).
PEERS = 20

_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_NEGATION = re.compile(r"\b(?:not|never|no|none|nothing|nobody|without)\b|n't\b", re.I)
_CHANGE = re.compile(
    r"\b(?:now|no longer|any ?more|instead|switched|switch|changed|change|moved|move|"
    r"from now on|these days|nowadays|new|updated|replaced|stopped|quit|started)\b", re.I)


@dataclass(frozen=True)
class Proposal:
    relation: Relation
    newer_id: str
    older_id: str
    reason: str
    confidence: float
    fingerprint: str


def fingerprint(newer: StoredUnit, older: StoredUnit) -> str:
    """The pair's statements, whatever the relation: one proposal per pair, ever."""
    text = "\x1f".join((newer.type, newer.fingerprint, older.type, older.fingerprint))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def _negated(text: str) -> bool:
    return bool(_NEGATION.search(text.replace("\u2019", "'")))


def relation_of(newer: StoredUnit, older: StoredUnit, cosine: float
                ) -> tuple[Relation, str, float] | None:
    """The relation newer -> older, its reason and confidence, or None (the rules above)."""
    if newer.subject and newer.subject == older.subject and newer.type == older.type \
            and (newer.value or "") != (older.value or "") \
            and (not broad(newer.subject) or cosine >= CLOSE):
        if newer.stated and newer.confidence >= older.confidence:
            return "replaces", f"restates {newer.subject} with another value", 0.9
        return "challenges", f"another value for {newer.subject}", 0.75
    if cosine < CLOSE:
        return None
    numbers_differ = set(_NUMBER.findall(newer.content)) != set(_NUMBER.findall(older.content))
    negation_differs = _negated(newer.content) != _negated(older.content)
    changed = bool(_CHANGE.search(newer.content))
    if numbers_differ or negation_differs:
        what = "other numbers" if numbers_differ else "the opposite"
        if changed:
            return "replaces", f"says it changed: {what}", round(min(0.89, 0.5 + cosine / 3), 3)
        return "challenges", f"close, but {what}", round(min(0.85, 0.4 + cosine / 3), 3)
    old_words, new_words = _words(older.content), _words(newer.content)
    if cosine >= NEAR and old_words and len(new_words) > len(old_words) \
            and len(old_words & new_words) / len(old_words) >= KEPT_WORDS:
        return "refines", "restates it with more detail", round(min(0.85, cosine - 0.1), 3)
    return None


def propose(recent: Sequence[StoredUnit], topic_units: Sequence[StoredUnit],
            cosine: Callable[[str, str], float | None], linked: set[tuple[str, str]],
            known: set[str]) -> list[Proposal]:
    """Proposals newer -> older for every recent unit against the older units of its
    topic (``topic_units``), skipping linked pairs and known fingerprints; deterministic."""
    out: list[Proposal] = []
    for newer in sorted(recent, key=lambda u: (u.created_at, u.memory_id)):
        if newer.type in EPISODIC:
            continue
        peers = [(cosine(newer.memory_id, o.memory_id), o) for o in topic_units
                 if o.type == newer.type
                 and (o.created_at, o.memory_id) < (newer.created_at, newer.memory_id)
                 and (newer.memory_id, o.memory_id) not in linked]
        peers.sort(key=lambda p: (-(p[0] if p[0] is not None else -1.0), p[1].memory_id))
        for similarity, older in peers[:PEERS]:
            mark = fingerprint(newer, older)
            if mark in known:
                continue
            found = relation_of(newer, older, similarity if similarity is not None else 0.0)
            if found is not None:
                relation, reason, confidence = found
                out.append(Proposal(relation, newer.memory_id, older.memory_id, reason,
                                    confidence, mark))
                known.add(mark)
    return out


def auto_applies(proposal: Proposal, mode: str, threshold: float) -> bool:
    """In ``auto`` mode, a ``replaces`` or ``challenges`` proposal at ``threshold`` or
    above is applied without review; in ``shadow`` mode (the default) none is."""
    return mode == "auto" and proposal.relation != "refines" \
        and proposal.confidence >= threshold
