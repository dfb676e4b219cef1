"""Query expansion from open insights (seed 004's ``memory_recall_query_expanded``).

An open ``conflict`` or ``evolves_pending`` insight says two memories disagree or one may
replace the other; a question about one side should also find the other. When a
question shares a content word with both memories of such an insight, recall adds
their other content words to the searched text, at most
``memory.retrieval.insight_terms`` of them (bounded, so lexical recall stays stable),
from the newest open insights first, and records them in the bundle's plan
(``plan.expansion``: the insights and the terms). Only insights whose memories the
recall's view sees are read (storage/visibility.py), so no term comes from a memory the
reader may not see. With no open insight that matches, the searched text and the plan
are exactly those without expansion.
"""

from __future__ import annotations

from typing import Any

from orchmem.models.core.shapes import Status
from orchmem.models.language.textquery import STOPWORDS, query_terms
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.rows import get_nodes
from orchmem.models.storage.reflection.insights import open_insights
from orchmem.models.storage.search import row_cache
from orchmem.models.storage.search.reads import contents, passing
from orchmem.models.storage.visibility import View

KINDS = ("conflict", "evolves_pending")
#: Newest open insights read per recall.
MAX_INSIGHTS = 20
#: An insight's memories are read whatever their status (get_nodes' rule).
_STATUSES = tuple(s.value for s in Status)
#: The row cache's entry of each memory's content words.
_WORDS = "expansion_words"


def _words(text: str) -> list[str]:
    return [t.lower() for t in query_terms(text) if t.lower() not in STOPWORDS]


def _seen_words(odb: OrchestratorDB, ids: list[str], view: View) -> dict[str, list[str]]:
    """The content words of those of ``ids`` that ``view`` sees (any status, forgotten
    ones left out), inside a snapshot: through the snapshot's row cache when there is one
    (each memory's words made once per change of the rows), else read as nodes."""
    cache = row_cache.current(odb)
    if cache is None:
        return {n.memory_id: _words(n.content) for n in get_nodes(odb, ids, view)}
    visible = sorted(passing(odb, ids, _STATUSES, None, view))

    def read(missing: list[str]) -> dict[str, list[str] | None]:
        texts = contents(odb, missing)
        return {m: _words(texts[m]) if m in texts else None for m in missing}
    words = cache.per_memory(_WORDS, visible, read)
    return {m: found for m in visible if (found := words[m]) is not None}


def expand(odb: OrchestratorDB, text: str, view: View, max_terms: int
           ) -> tuple[str, dict[str, Any] | None]:
    """``text`` with the terms of the open insights that match it, and what was added
    (None when nothing was: ``text`` is returned unchanged)."""
    if max_terms <= 0:
        return text, None
    with odb.snapshot():
        found = [x for x in open_insights(odb, MAX_INSIGHTS) if x["kind"] in KINDS]
        ids = sorted({m for x in found for m in x["memoryIds"]})
        seen = _seen_words(odb, ids, view) if found else {}
    asked = set(_words(text))
    terms: list[str] = []
    used: list[str] = []
    for insight in found:
        if not insight["memoryIds"] or not all(m in seen for m in insight["memoryIds"]):
            continue
        sides = [seen[m] for m in insight["memoryIds"]]
        if not all(asked & set(side) for side in sides):
            continue
        new = [w for side in sides for w in side if w not in asked and w not in terms]
        if new:
            used.append(insight["insightId"])
            terms.extend(new[:max_terms - len(terms)])
        if len(terms) >= max_terms:
            break
    if not terms:
        return text, None
    return f"{text} {' '.join(terms)}", {"insightIds": used, "terms": terms}


def with_expansion(plan: dict[str, Any] | None, expansion: dict[str, Any] | None
                   ) -> dict[str, Any] | None:
    """The bundle's plan with ``expansion`` recorded (the plan as it is without one)."""
    if expansion is None:
        return plan
    return {**(plan or {}), "expansion": expansion}
