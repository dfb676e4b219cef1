"""Recall's steps about time and plans, after the hybrid search has fused its lists.

- the floor as a gate: when the plan has an ``answered_floor`` and a candidate passes
  the relevance floor, the others are held to that lower floor (:func:`gate_floor`);
- the as-of filter (models/core/validity.py): a candidate not valid and known at ``as_of``
  is dropped, as the relevance floor drops one, before the top N is cut;
- neighbour expansion: the plan's first hits pass a share of their score to the
  memories next to them in the same conversation and to those their edges reach;
- the favours, after the expansion so that they reach what it added: a memory dated
  inside the question's time window (its validFrom, else createdAt, or a dated phrase
  of its content), or said by someone the question names (models/recall/router.py);
- substance: a memory that only asks, or says almost nothing, has its score lowered
  after the expansion (models/language/substance.py), so it still hands its score on first;
  for a question about when, not one that names a day ("Alright, see you tomorrow!"
  says when, however short), nor one of a type the question asks for;
- latest state: each memory is replaced by the head of its Updates chain.

Each step takes and returns ranked lists (models/recall/ranking.py); rows are the node rows
recall read once (models/storage/search/reads.py) and are never read twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

from orchmem.models.core.shapes import MemoryType, Status
from orchmem.models.core.validity import valid_at
from orchmem.models.language.speakers import has_topic, speaker, without
from orchmem.models.language.substance import Kind, kind
from orchmem.models.recall.ranking import Modifiers, Ranked
from orchmem.models.recall.router import MAX_DATED_SCAN, Plan
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories import chains
from orchmem.models.storage.search import fts, neighbours, row_cache, vectors
from orchmem.models.storage.search import reads as recall_reads

Row = tuple[Any, ...]
Keep = Callable[[str], bool]
_STATUS, _CREATED, _UPDATED = recall_reads.STATUS, recall_reads.CREATED_AT, recall_reads.UPDATED_AT
_FROM, _TO, _REFS = recall_reads.VALID_FROM, recall_reads.VALID_TO, recall_reads.TIME_REFS
_CONTENT = recall_reads.CONTENT


@dataclass(frozen=True)
class Asked:
    """What a recall asked about time: ``as_of`` (valid time) and ``known_at``
    (transaction time), both in stored format, ``latest``, the plan."""

    as_of: str | None = None
    known_at: str | None = None
    latest: bool = False
    plan: Plan | None = None

    def statuses(self, include_inactive: bool) -> list[str]:
        """The statuses searched: superseded ones too when time or heads matter."""
        if include_inactive:
            return [s.value for s in Status]
        if self.timed or self.latest:
            return [Status.ACTIVE.value, Status.SUPERSEDED.value]
        return [Status.ACTIVE.value]


    @property
    def timed(self) -> bool:
        """Whether a time (valid or known) was asked."""
        return self.as_of is not None or self.known_at is not None


def focus(odb: OrchestratorDB, text: str, asked: Asked) -> tuple[str, Asked]:
    """The text to search and the plan with its ``speakers``: the question's names that
    label many memories are left out of the search (models/language/speakers.py), unless no
    topic would be left ("Tell me about Nate")."""
    plan = asked.plan
    if plan is None or plan.speaker_labels <= 0 or not plan.names:
        return text, asked
    with odb.snapshot():
        found = fts.labelled(odb, plan.names, plan.speaker_labels)
    rest = without(text, found)
    if not found or not has_topic(rest):
        return text, asked
    return rest, replace(asked, plan=replace(plan, speakers=found))


def gate_floor(floor: Keep, lower: Keep, candidates: set[str]) -> Keep:
    """``lower`` when one of ``candidates`` passes ``floor``, else ``floor``.

    The floor says whether a question is about anything stored at all (an unrelated
    question gets nothing as before: nothing passes it). Once one memory passes, the
    question is about something here, and its other evidence often shares fewer of its
    words ("Caroline's political leaning": her turns about activism), so the others
    need only reach the lower floor."""
    return lower if any(floor(m) for m in candidates) else floor


def either(floor: Keep, kept: set[str]) -> Keep:
    """``floor``, with the memories of ``kept`` passing it whatever their cosine (the
    window list of a question that names days and nothing else)."""
    return lambda memory_id: memory_id in kept or floor(memory_id)


def valid_keep(rows: Mapping[str, Row], asked: Asked) -> Keep:
    """A candidate filter: valid at ``asked.as_of`` and known at ``asked.known_at``."""
    def keep(memory_id: str) -> bool:
        row = rows.get(memory_id)
        return row is not None and valid_at(
            asked.as_of, status=row[_STATUS], created_at=row[_CREATED],
            updated_at=row[_UPDATED], valid_from=row[_FROM], valid_to=row[_TO],
            known=asked.known_at)
    return keep


def both(first: Keep | None, second: Keep | None) -> Keep | None:
    if first is None or second is None:
        return first or second
    return lambda memory_id: first(memory_id) and second(memory_id)


def in_window(row: Row, span: tuple[date, date]) -> bool:
    """True when the memory is dated inside ``span``: by when it became true, or by a
    dated phrase of its content that overlaps it."""
    start, end = span[0].isoformat(), span[1].isoformat()
    if start <= (row[_FROM] or row[_CREATED])[:10] <= end:
        return True
    for ref in json.loads(row[_REFS]) if row[_REFS] else ():
        if ref["from"] <= end and start <= ref["to"]:
            return True
    return False


def window_candidates(odb: OrchestratorDB, plan: Plan | None, statuses: list[str],
                      types: list[str] | None,
                      admit: Callable[[list[str]], set[str]]) -> list[str]:
    """The candidates of the plan's window list (:func:`dated`), sorted: memories created
    in its days or up to ``dated_after_days`` after, dated inside it (:func:`in_window`),
    that ``admit`` passes. No query vector needed: recall reads them while it embeds."""
    if plan is None or plan.window is None or plan.dated_hits <= 0:
        return []
    start, end = plan.window
    after = (end + timedelta(days=plan.dated_after_days + 1)).isoformat()
    ids = recall_reads.said_between(odb, start.isoformat(), after, statuses,
                                    types or [t.value for t in MemoryType], MAX_DATED_SCAN)
    rows = {i.memory_id: i.row for i in recall_reads.rank_inputs(odb, ids)}
    return sorted(admit([m for m in ids if m in rows and in_window(rows[m], plan.window)]))


def dated(odb: OrchestratorDB, plan: Plan | None, encoded: tuple[Any, str] | None,
          candidates: list[str], index: vectors.Searchable | None = None) -> dict[str, float]:
    """The plan's window list: the best ``dated_hits`` of its ``candidates``
    (:func:`window_candidates`) by cosine with the query vector (``encoded``: vector,
    embedder; ``index`` as vectors.similarities takes it)."""
    if plan is None or not candidates or encoded is None:
        return {}
    cosines = vectors.similarities(odb, encoded[0], embedder=encoded[1], ids=candidates,
                                   index=index)
    best = sorted(cosines, key=lambda m: (-cosines[m], m))[:plan.dated_hits]
    return {m: cosines[m] for m in best}


def boost_window(ranked: list[Ranked], rows: Mapping[str, Row], plan: Plan) -> list[Ranked]:
    """Favour the memories dated inside the plan's window (score * (1 + window boost)),
    or, for a question about when without one, those whose content names a day
    (score * (1 + dated boost))."""
    window = plan.window
    if window is not None and plan.window_boost > 0:
        factor = 1.0 + plan.window_boost
        favoured = {m for m, row in rows.items() if in_window(row, window)}
    elif plan.dated_boost > 0:
        factor = 1.0 + plan.dated_boost
        favoured = {m for m, row in rows.items() if row[_REFS]}
    else:
        return ranked
    out = [replace(r, score=r.score * factor) if r.memory_id in favoured else r
           for r in ranked]
    return sorted(out, key=lambda r: (-r.score, r.memory_id))


def boost_speakers(ranked: list[Ranked], rows: Mapping[str, Row], plan: Plan) -> list[Ranked]:
    """Favour the memories said by someone the question names (score * (1 + boost))."""
    if plan.speaker_boost <= 0 or not plan.names:
        return ranked
    names = set(plan.names)
    factor = 1.0 + plan.speaker_boost
    out = [replace(r, score=r.score * factor)
           if r.memory_id in rows and speaker(rows[r.memory_id][_CONTENT]) in names else r
           for r in ranked]
    return sorted(out, key=lambda r: (-r.score, r.memory_id))


def expand(odb: OrchestratorDB, ranked: list[Ranked], plan: Plan,
           admit: Callable[[list[str]], set[str]]) -> list[Ranked]:
    """Add the neighbours of the plan's first hits, each with a share of its hit's score
    (a memory already ranked keeps the higher of its two scores). ``admit`` keeps the
    neighbours that pass the recall's filters (status, types, as-of)."""
    if plan.expand_hits <= 0 or not ranked:
        return ranked
    hits = ranked[:plan.expand_hits]
    near = neighbours.around(odb, [h.memory_id for h in hits], plan.session_radius)
    scores = {r.memory_id: r for r in ranked}
    allowed = admit(sorted({n.memory_id for ns in near.values() for n in ns} - set(scores)))
    for hit in hits:
        for neighbour in near.get(hit.memory_id, ()):
            memory_id = neighbour.memory_id
            # What follows a question in a conversation is most likely its answer.
            answers = neighbour.how == "after" and neighbour.hit_asks
            inherited = hit.score * (plan.answer_share if answers else plan.expand_share)
            current = scores.get(memory_id)
            if current is None and memory_id not in allowed:
                continue
            if current is None or current.score < inherited:
                scores[memory_id] = Ranked(
                    memory_id=memory_id, score=inherited, rrf=0.0, vector_rank=None,
                    text_rank=None, modifiers=current.modifiers if current else _NEUTRAL)
    return sorted(scores.values(), key=lambda r: (-r.score, r.memory_id))


def weigh_substance(odb: OrchestratorDB, ranked: list[Ranked], rows: Mapping[str, Row],
                    plan: Plan) -> list[Ranked]:
    """Lower the score of a memory that asks (x asks factor) or is terse (x terse factor);
    the contents of neighbours the expansion added are read here. With
    ``dated_substance``, a question about when (a window, or the dated favour) keeps the
    score of a memory whose content names a day: short or asking, it still says when.
    A memory of a type the question asks for (its intent modifier is above 1) keeps its
    score too: "My name is Dana." is terse, and it is the answer to "what is the user's
    name?" (models/language/intent.py)."""
    factors = {Kind.ASKS: plan.asks_factor, Kind.TERSE: plan.terse_factor, Kind.STATES: 1.0}
    if all(f == 1.0 for f in factors.values()) or not ranked:
        return ranked
    kinds = _kinds(odb, [r.memory_id for r in ranked], rows)
    when = plan.dated_substance and (plan.window is not None or plan.dated_boost > 0)
    kept = {m for m, row in rows.items() if row[_REFS]} if when else set()
    out = []
    for r in ranked:
        asked_for = r.modifiers.intent > 1.0
        factor = 1.0 if asked_for or r.memory_id in kept else factors[kinds[r.memory_id]]
        # x * 1.0 is x: most memories state something and keep their object
        out.append(r if factor == 1.0 else replace(r, score=r.score * factor))
    return sorted(out, key=lambda r: (-r.score, r.memory_id))


def _kinds(odb: OrchestratorDB, ids: list[str], rows: Mapping[str, Row]) -> dict[str, Kind]:
    """The substance of each of ``ids`` (of an absent memory: that of no content); with
    the snapshot's row cache, each memory's is found once (its content cannot change
    without the cache's counter)."""
    def read(missing: list[str]) -> dict[str, Kind]:
        texts = {m: rows[m][_CONTENT] for m in missing if m in rows}
        texts |= recall_reads.contents(odb, [m for m in missing if m not in texts])
        return {m: kind(texts.get(m, "")) for m in missing}
    return row_cache.made_once(row_cache.current(odb), "kind", ids, read)


_NEUTRAL = Modifiers(importance=1.0, recency=1.0, confidence=1.0, contradiction=1.0)


def to_heads(odb: OrchestratorDB, ranked: list[Ranked], asked: Asked | None = None,
             admit: Callable[[list[str]], set[str]] | None = None) -> list[Ranked]:
    """Each memory replaced by the head of its Updates chain (as it was at the asked
    valid and known times); a
    head reached twice is kept at its best rank. A head ``admit`` refuses (another
    session's, a restricted one) drops the memory: its latest state is not this
    request's to see, and an older state would be passed off as the latest."""
    asked = asked or Asked()
    head = chains.heads(odb, [r.memory_id for r in ranked], asked.known_at, asked.as_of)
    moved = sorted({head[r.memory_id] for r in ranked} - {r.memory_id for r in ranked})
    hidden = set(moved) - admit(moved) if admit is not None and moved else set()
    out: list[Ranked] = []
    seen: set[str] = set()
    for item in ranked:
        target = head[item.memory_id]
        if target in seen or target in hidden:
            continue
        seen.add(target)
        out.append(item if target == item.memory_id else replace(item, memory_id=target))
    return out


def widened(limit: int, asked: Asked) -> int:
    """How many fused candidates the steps after fusion start from."""
    return limit * 2 + 10 if asked.plan is not None or asked.latest else limit


def with_added(odb: OrchestratorDB, ranked: list[Ranked],
               rows: Mapping[str, Row]) -> Mapping[str, Row]:
    """``rows`` and those of the memories the expansion added (one read for them)."""
    added = [r.memory_id for r in ranked if r.memory_id not in rows]
    if not added:
        return rows
    return {**rows, **{i.memory_id: i.row for i in recall_reads.rank_inputs(odb, added)}}


def planned(odb: OrchestratorDB, ranked: list[Ranked], rows: Mapping[str, Row], plan: Plan,
            admit: Callable[[list[str]], set[str]]) -> list[Ranked]:
    """The plan's favours (window, dated, speaker), expansion and substance, in order.

    With ``favour_after_expansion`` the favours come after the expansion and reach the
    memories it added: they say something of the memory itself (said by the person
    asked about, dated in the asked days), so a neighbour inherits its hit's plain
    score and then gets its own favour. Without it, a hit's favour is handed on to
    every neighbour (the other speaker's turns beside it too), and the answer reached
    through the other speaker's question never gets its own
    (docs/concepts/recall.md#favours-after-the-expansion). The added rows are read
    once; substance reuses them instead of reading their contents."""
    if not plan.favour_after_expansion:
        ranked = boost_speakers(boost_window(ranked, rows, plan), rows, plan)
        return weigh_substance(odb, expand(odb, ranked, plan, admit), rows, plan)
    ranked = expand(odb, ranked, plan, admit)
    rows = with_added(odb, ranked, rows)
    ranked = boost_speakers(boost_window(ranked, rows, plan), rows, plan)
    return weigh_substance(odb, ranked, rows, plan)


def after_fusion(odb: OrchestratorDB, ranked: list[Ranked], rows: Mapping[str, Row],
                 asked: Asked, admit: Callable[[list[str]], set[str]],
                 limit: int) -> list[Ranked]:
    """The plan's favours, expansion and substance, then latest heads; the best
    ``limit``."""
    if asked.plan is not None:
        ranked = planned(odb, ranked, rows, asked.plan, admit)
    if asked.latest:
        ranked = to_heads(odb, ranked, asked, admit)
    return ranked[:limit]


def plan_dump(asked: Asked) -> dict[str, Any] | None:
    """The bundle's ``plan``: the router's plan and what was asked about time."""
    if asked.plan is None and not asked.timed and not asked.latest:
        return None
    out = asked.plan.dump() if asked.plan is not None else {"intent": None}
    return {**out, "asOf": asked.as_of, "knownAt": asked.known_at, "latest": asked.latest}
