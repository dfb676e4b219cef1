"""Recall: the synchronous read path. A query in, a bundle of memories out, in milliseconds.

``recall(orchestrator_id, query, databases=…)`` runs in the caller's process, reading
the orchestrator's SQLite file directly (no Celery): full-text top-K and vector
top-K, fused by RRF with the modifiers of :mod:`orchmem.models.recall.ranking`, then the
selected memories with their scores, the edges among and next to them, the
neighbouring memories those edges reach, and every source of each memory.

Scope: a request names exactly one orchestrator. A requester asking for another
orchestrator's memory, or naming a memoryId another orchestrator issued, gets
ScopeViolation before any file is opened, and the attempt is written to the
requester's memory.log.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import wait
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeAlias

from orchmem.config import (
    EmbeddingError,
    MemoryValidationError,
    ScopeViolation,
    check_orchestrator_id,
)
from orchmem.config.memory_settings import RetrievalSettings
from orchmem.models.core.contradictions import contradicted
from orchmem.models.core.governance_fields import Sensitivity
from orchmem.models.core.shapes import (
    MemoryNode,
    MemoryType,
    check_memory_id,
    parse_ts,
    utc_now,
)
from orchmem.models.core.trusted import trusted
from orchmem.models.core.validity import check_as_of
from orchmem.models.embedding.embedders import get_embedder, loaded_embedder
from orchmem.models.embedding.query_vectors import query_vectors
from orchmem.models.execlog.episodes import similar_episodes
from orchmem.models.governance.restricted_reads import audit_restricted_read
from orchmem.models.language import textquery
from orchmem.models.language.intent import favoured_types
from orchmem.models.recall.bundle import RecallBundle, bundle_parts
from orchmem.models.recall.expansion import expand, with_expansion
from orchmem.models.recall.log_answer import log_answer
from orchmem.models.recall.overlap import Overlap
from orchmem.models.recall.plans import (
    Asked,
    Keep,
    after_fusion,
    both,
    dated,
    either,
    focus,
    gate_floor,
    plan_dump,
    valid_keep,
    widened,
    window_candidates,
)
from orchmem.models.recall.ranking import Features, Ranked, fuse
from orchmem.models.recall.rerank import rerank
from orchmem.models.recall.router import Plan
from orchmem.models.recall.router import plan as route_plan
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.execlog.watermark import recall_watermark
from orchmem.models.storage.memories.contradictions import contradictions
from orchmem.models.storage.memories.selection import Selector, select_ids
from orchmem.models.storage.search import fts, neighbours, row_cache, vectors
from orchmem.models.storage.search import reads as recall_reads
from orchmem.models.storage.visibility import (
    ALL_STATUSES,
    DEFAULT_VIEW,
    View,
    make_view,
    plain_id,
)
from orchmem.models.telemetry import meters, names, spans
from orchmem.models.workspace.folders import Workspace
from orchmem.models.workspace.memlog import MemoryLog
from orchmem.models.writeback.secrets import find_secrets

if TYPE_CHECKING:
    import numpy as np

Mode = Literal["hybrid", "vector", "text"]
#: Characters of the query given to the embedding model (it reads 256 tokens at most).
MAX_EMBED_CHARS = 2000
#: The sensitivities a recall may return and still have its query text recorded.
OPEN_SENSITIVITIES = frozenset({Sensitivity.PUBLIC, Sensitivity.INTERNAL})


def deny(databases: Databases, workspace: Workspace, message: str,
         **fields: Any) -> ScopeViolation:
    """Log a refused request to the requester's memory.log and return the error to raise."""
    settings = databases.settings
    MemoryLog(workspace.log_path, workspace.orchestrator_id,
              int(settings.memory_log_max_mb * 1024 * 1024),
              settings.memory_log_backups).write("scope_denied", reason=message, **fields)
    return ScopeViolation(message)


def check_scope(databases: Databases, orchestrator_id: str, requester: str | None,
                memory_ids: Sequence[str] | None) -> None:
    """Fail closed (and log) when the request reaches outside ``orchestrator_id``."""
    check_orchestrator_id(orchestrator_id)
    asking = requester if requester is not None else orchestrator_id
    check_orchestrator_id(asking, where="requester")
    workspace = databases.workspace(asking)
    if asking != orchestrator_id:
        raise deny(databases, workspace, f"orchestrator {asking!r} may not recall the memory of "
                   f"{orchestrator_id!r}: cross-orchestrator recall is disabled in v1",
                   target=orchestrator_id)
    for memory_id in memory_ids or ():
        try:
            check_memory_id(memory_id, orchestrator_id)
        except ScopeViolation as exc:
            raise deny(databases, workspace, str(exc), memoryId=str(memory_id)[:80]) from None


P = ParamSpec("P")


def _traced(function: Callable[P, RecallBundle]) -> Callable[P, RecallBundle]:
    """``function`` (:func:`recall`) in one span, whose children are its steps, and
    its latency and hits recorded as metrics. The span holds the orchestrator, mode,
    counts and the router's plan (never the query's text or a memory's content)."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> RecallBundle:
        with spans.span(names.SPAN_RECALL, {names.ORCHESTRATOR: str(args[0] if args else "")
                                            }) as traced:
            bundle = function(*args, **kwargs)
            meters.recall_done(bundle.took_ms / 1000, len(bundle.nodes), bundle.mode)
            mark = bundle.watermark or {}
            if mark:
                meters.projection_lag(int(mark.get("episodesBehindRuns", 0)),
                                      int(mark.get("vectorsBehindMemories", 0)))
            if spans.enabled():
                traced.update(_recall_attributes(bundle))
                if _may_record_query(kwargs, bundle):
                    traced.set(names.QUERY_TEXT, bundle.query)
            return bundle

    return run


def _may_record_query(kwargs: dict[str, Any], bundle: RecallBundle) -> bool:
    """Whether the recall span may hold the query's text: only with
    ``telemetry.record_query_text`` on, and never for a restricted read: one whose view
    admits restricted memories, that returned a confidential or restricted memory, or
    whose query the secret detector flags (docs/operations/tracing.md#query-text)."""
    databases = kwargs.get("databases")
    if not isinstance(databases, Databases) or \
            not databases.settings.telemetry.record_query_text:
        return False
    view = kwargs.get("view", DEFAULT_VIEW)
    if not isinstance(view, View) or view.include_restricted:
        return False
    if any(node.memory.sensitivity not in OPEN_SENSITIVITIES for node in bundle.nodes) or \
            any(e.get("sensitivity") not in OPEN_SENSITIVITIES for e in bundle.episodes):
        return False
    return not find_secrets(bundle.query)


def _recall_attributes(bundle: RecallBundle) -> dict[str, Any]:
    """Counts, mode and the plan's flags and numbers; no text of the query (the plan's
    phrases and names come from it) nor of any memory."""
    candidates = bundle.candidates or {}
    found: dict[str, Any] = {
        names.MODE: bundle.mode, names.HITS: len(bundle.nodes),
        names.QUERY_CHARS: len(bundle.query), names.VECTOR_AVAILABLE: bundle.vector_available,
        names.TEXT_HITS: int(candidates.get("text", 0)),
        names.VECTOR_HITS: int(candidates.get("vector", 0))}
    for key, value in (bundle.plan or {}).items():
        if (key == "intent" and isinstance(value, str)) or isinstance(value, bool | int | float):
            found[names.PLAN + key] = value
    return found


@_traced
def recall(
    orchestrator_id: str, query: str, *,
    databases: Databases,
    top_n: int | None = None, types: Sequence[str] | None = None,
    include_inactive: bool = False, memory_ids: Sequence[str] | None = None,
    requester: str | None = None, mode: Mode = "hybrid",
    params: RetrievalSettings | None = None, now: datetime | None = None,
    episodes: bool = False, view: View = DEFAULT_VIEW, purpose: str | None = None,
    as_of: datetime | str | None = None, known_at: datetime | str | None = None,
    latest: bool = False,
    route: bool | Callable[[str, datetime], Plan] | None = None,
    run_id: str | None = None, conversation_id: str | None = None, log_after: int = 0,
) -> RecallBundle:
    """The memories of ``orchestrator_id`` most relevant to ``query``.

    ``types`` restricts memory types; ``include_inactive`` also returns superseded and
    retracted memories; ``memory_ids`` restricts the search to those memories;
    ``requester`` is the orchestrator asking (default: the same one); ``mode`` picks
    "hybrid" (default), "vector" or "text"; ``params`` overrides the orchestrator's
    retrieval settings; ``now`` is the clock for recency; ``episodes`` adds the most
    similar past episodes; ``view`` what it sees (visibility.py; a restricted read needs
    a ``purpose``, audited); lagging projections add warnings (watermark.py). ``as_of``:
    valid time, ``known_at``: transaction time (validity.py); ``latest``: heads of Updates
    chains; ``route``: the router's plan (router.py; None: the settings'); ``run_id`` /
    ``conversation_id``: memories with a source from that run / conversation; a *what
    happened* recall's log events: ``bundle.log`` (log_answer.py; after ``log_after``).

    Raises ScopeViolation (logged) for another orchestrator's memory, MemoryValidationError
    for a bad type, query or time, MemoryCorrupt / MemoryDisabled when the database
    cannot be used. When the vector side fails it answers from full text and says so.
    """
    started = time.perf_counter()
    _check_request(databases, orchestrator_id, query, requester, memory_ids, view, purpose)
    type_values = _check_types(types)
    sourced = _check_sourced(run_id, conversation_id, log_after)
    times = (check_as_of(as_of, clock := now or utc_now()),
             check_as_of(known_at, clock, "known_at"))
    odb = databases.open(orchestrator_id, create=False)
    text = textquery.clean_text(query)
    if odb is None:
        return _empty(orchestrator_id, text, mode, started, "this orchestrator has no memory yet")
    params = params or odb.memory.retrieval
    limit = _limit(top_n, params)
    if not text.strip():
        return _empty(orchestrator_id, text, mode, started, "empty query")
    route = params.router if route is None else route
    searched, asked = _asked(odb, text, clock, times, latest, route)
    searched, expanded = expand(odb, searched, view, params.insight_terms)
    search = _Search(text=searched, mode=mode, params=params, limit=limit, types=type_values,
                     within=_within(odb, memory_ids, sourced), view=view,
                     statuses=asked.statuses(include_inactive), asked=asked)
    warnings: list[str] = []
    answer = _snapshot_answer(odb, search, clock, warnings, episodes, databases.overlap)
    audit_restricted_read(odb, view, answer, requester or orchestrator_id, purpose, text)
    plan = _with_log(odb, search, answer, sourced["runId"], warnings, log_after)
    return trusted(
        RecallBundle, orchestrator_id=orchestrator_id, query=text, mode=mode, warnings=warnings,
        plan=with_expansion(plan, expanded),
        took_ms=round((time.perf_counter() - started) * 1000, 3), **answer)


def _check_sourced(run_id: object, conversation_id: object, log_after: object
                   ) -> dict[str, str | None]:
    """The run and conversation asked for, checked, and ``log_after`` (a log seq)."""
    check_log_after(log_after)
    return {"runId": plain_id(run_id, "runId"),
            "conversationId": plain_id(conversation_id, "conversationId")}


def check_log_after(value: object) -> None:
    """Raise MemoryValidationError naming ``logAfter`` unless ``value`` is a log seq."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MemoryValidationError("logAfter: a log seq (an integer >= 0)",
                                    [{"path": "logAfter", "message": "an integer >= 0"}])


def _within(odb: OrchestratorDB, memory_ids: Sequence[str] | None,
            sourced: dict[str, str | None]) -> Sequence[str] | None:
    """The memories the search is restricted to: ``memory_ids`` (None: all), and those
    with a source from the run and/or conversation asked for (selection.py's rule)."""
    run_id, conversation_id = sourced["runId"], sourced["conversationId"]
    if run_id is None and conversation_id is None:
        return memory_ids
    found = select_ids(odb, Selector(workflow_run_id=run_id, conversation_id=conversation_id),
                       hard=True)
    return found if memory_ids is None else [m for m in found if m in set(memory_ids)]


def _with_log(odb: OrchestratorDB, search: _Search, answer: dict[str, Any],
              run_id: str | None, warnings: list[str], after: int) -> dict[str, Any] | None:
    """Add the log events of a *what happened* recall to ``answer`` (log_answer.py);
    the plan, listing the sources read when the log was one of them."""
    plan = plan_dump(search.asked)
    settings = odb.memory.log
    mark = answer.get("watermark") or {}
    lagging = max(mark.get("episodesBehindRuns", 0),
                  mark.get("vectorsBehindMemories", 0)) > settings.max_projection_lag
    found = log_answer(odb, settings, search.asked.plan, run_id,
                       [n.memory.memory_id for n in answer["nodes"]], search.view, lagging,
                       after)
    if found.log is None:
        return plan
    answer["log"] = found.log
    warnings += found.warnings
    read = [{"source": "memories", "why": "hybrid search of the memories"}, *found.sources]
    return {**(plan or {"intent": None}), "sources": read}


def _limit(top_n: int | None, params: RetrievalSettings) -> int:
    limit = top_n if top_n is not None else params.top_n
    if not 1 <= limit <= 1000:
        raise MemoryValidationError(f"top_n must be in 1..1000, got {limit}")
    return limit


def _snapshot_answer(odb: OrchestratorDB, search: _Search, clock: datetime,
                     warnings: list[str], episodes: bool, overlap: Overlap) -> dict[str, Any]:
    """One read snapshot for the answer, the similar episodes and the watermark. The
    query is embedded on this thread; the full-text side runs meanwhile on a free helper
    (:func:`_overlaps`), on this connection in the snapshot (models/recall/overlap.py), or
    else after it, the query embedded first (no snapshot waits on the model)."""
    if _overlaps(odb, search):
        with overlap.helper() as helper:
            if helper is not None:
                with odb.snapshot():
                    side = helper.run(odb.borrowing(spans.carried(
                        partial(_text_side, odb, search, True))))
                    try:
                        encoded = _embed(odb, search.text, warnings)
                    finally:
                        wait([side])  # the connection is the helper's until it returns
                    return _finish(odb, search, side.result(), encoded, clock, warnings,
                                   episodes)
    encoded = _embed(odb, search.text, warnings) if search.mode in ("hybrid", "vector") else None
    with odb.snapshot():
        return _finish(odb, search, _text_side(odb, search, False), encoded, clock, warnings,
                       episodes)


def _overlaps(odb: OrchestratorDB, search: _Search) -> bool:
    """Whether the full-text side runs beside the embedding: hybrid, the setting on, the
    model loaded (a first load takes seconds, too long for an open snapshot), the vector
    not cached (no model run to hide the search behind)."""
    if search.mode != "hybrid" or not search.params.overlap:
        return False
    settings = odb.settings.embedding
    embedder = loaded_embedder(settings)
    return embedder is not None and not query_vectors(settings.query_cache_size).cached(
        embedder, search.text[:MAX_EMBED_CHARS])


def _finish(odb: OrchestratorDB, search: _Search, text: _TextSide, encoded: Encoded | None,
            clock: datetime, warnings: list[str], episodes: bool) -> dict[str, Any]:
    answer = _answer(odb, search, text, encoded, clock, warnings)
    answer["episodes"] = similar_episodes(odb, search.text, view=search.view) if episodes else []
    answer["watermark"] = text.watermark
    warnings += text.lagging
    return answer


@dataclass(frozen=True)
class _TextSide:
    """What the answer reads without the query vector."""

    hits: list[fts.TextHit]
    #: The rows ranking reads of the hits (recall_reads.rank_inputs), and their features.
    inputs: list[recall_reads.RankInputs]
    features: dict[str, Features]
    #: The nodes of the first hits, made ahead for the bundle (recall_reads.nodes).
    nodes: dict[str, MemoryNode]
    #: The candidates of the plan's window list (recall_time.window_candidates).
    window: list[str]
    watermark: dict[str, Any]
    lagging: list[str]
    #: The vector index, refreshed in the snapshot ahead of the vector, or None.
    index: vectors.Searchable | None = None


def _text_side(odb: OrchestratorDB, search: _Search, ahead: bool) -> _TextSide:
    """The full-text hits, the window list's candidates, the watermark and, ``ahead``
    of the vector on a helper thread (:meth:`OrchestratorDB.borrowing`: raw statements
    only), the hits' rows and ranking features (in turn, the rows are read with the
    vector side's, in one statement)."""
    with spans.span(names.SPAN_RECALL_FULL_TEXT) as traced:
        hits = fts.search(odb, search.text, limit=search.params.top_k_text,
                          statuses=search.statuses, types=search.types, within=search.within,
                          view=search.view) if search.mode in ("hybrid", "text") else []
        traced.set(names.COUNT, len(hits))
    window = window_candidates(odb, search.asked.plan, search.statuses, search.types,
                               lambda ids: _admit(odb, search, ids)) \
        if search.mode != "text" else []
    mark, lagging = recall_watermark(odb, odb.memory.log.max_projection_lag)
    inputs = recall_reads.rank_inputs(odb, [h.memory_id for h in hits]) if ahead else []
    # The first hits (as many as the answer holds) are most likely in it.
    first = {h.memory_id for h in hits[:search.limit]}
    made = recall_reads.nodes([i.row for i in inputs if i.memory_id in first],
                              odb.orchestrator_id, row_cache.current(odb))
    if ahead:
        _prefetch(odb, search, [h.memory_id for h in hits[:search.limit]])
    return _TextSide(hits, inputs, _features(odb, inputs, search.view), made, window, mark, lagging,
                     _index_ahead(odb) if ahead else None)


def _prefetch(odb: OrchestratorDB, search: _Search, first: list[str]) -> None:
    """Into the row cache (if any), while the query embeds: the edges and sources of the
    first text hits (the assembly's) and the neighbours of those the plan expands."""
    recall_reads.prefetch(odb, first)
    plan = search.asked.plan
    if plan is not None and plan.expand_hits > 0 and row_cache.current(odb) is not None:
        neighbours.around(odb, first[:plan.expand_hits], plan.session_radius)


def _index_ahead(odb: OrchestratorDB) -> vectors.Searchable | None:
    """The vector index of the loaded embedder, refreshed in this snapshot, so that the
    vector side does not wait on that statement (None: no embedder loaded)."""
    embedder = loaded_embedder(odb.settings.embedding)
    return vectors.searchable(odb, embedder.version, embedder.dim) if embedder else None


def _check_request(databases: Databases, orchestrator_id: str, query: object,
                   requester: str | None, memory_ids: Sequence[str] | None, view: View,
                   purpose: str | None) -> None:
    """Fail closed (and log) outside ``orchestrator_id``; a restricted read states why."""
    if not isinstance(query, str):
        raise MemoryValidationError(f"query must be a string, got {type(query).__name__}")
    check_scope(databases, orchestrator_id, requester, memory_ids)
    make_view(include_restricted=view.include_restricted, purpose=purpose)


def _asked(odb: OrchestratorDB, text: str, clock: datetime,
           times: tuple[str | None, str | None], latest: bool,
           route: bool | Callable[[str, datetime], Plan]) -> tuple[str, Asked]:
    """The text to search and what the recall asks about time, with the router's plan
    when it routes (the plan may leave speakers' names out of the search: focus)."""
    planner = route_plan if route is True else route or None
    return focus(odb, text, Asked(as_of=times[0], known_at=times[1], latest=bool(latest),
                                  plan=planner(text, clock) if planner is not None else None))


@dataclass(frozen=True)
class _Search:
    text: str
    mode: Mode
    params: RetrievalSettings
    limit: int
    statuses: list[str]
    types: list[str] | None
    within: Sequence[str] | None
    asked: Asked
    view: View = DEFAULT_VIEW


def _check_types(types: Sequence[str] | None) -> list[str] | None:
    if types is None:
        return None
    values = []
    for value in types:
        try:
            values.append(MemoryType(value).value)
        except ValueError:
            raise MemoryValidationError(
                f"types: {value!r} is not a memory type ({', '.join(t.value for t in MemoryType)})"
            ) from None
    return values


Encoded: TypeAlias = "tuple[np.ndarray, str]"


def _embed(odb: OrchestratorDB, text: str, warnings: list[str]) -> Encoded | None:
    """The query vector and the embedder's version, or None (and a warning) on failure."""
    try:
        with spans.span(names.SPAN_RECALL_EMBED, {names.QUERY_CHARS: len(text)}):
            settings = odb.settings.embedding
            embedder = get_embedder(settings)
            vector = query_vectors(settings.query_cache_size).vector(embedder,
                                                                     text[:MAX_EMBED_CHARS])
        return vector, embedder.version
    except EmbeddingError as exc:
        warnings.append(f"vector search unavailable ({exc}); answered from full text")
        odb.log.write("recall_degraded", reason=str(exc)[:300])
        return None


def _answer(odb: OrchestratorDB, search: _Search, text: _TextSide,
            encoded: Encoded | None, now: datetime, warnings: list[str]) -> dict[str, Any]:
    """Search, rank and assemble; the caller holds one read snapshot around all of it."""
    text_hits = text.hits
    text_ids = [h.memory_id for h in text_hits]
    vector_hits: list[vectors.VectorHit] = []
    vector_available = encoded is not None
    index = text.index
    if encoded is not None:
        # The helper's index when it is the query vector's: one refresh per recall.
        index = vectors.current(odb, index, encoded[1], int(encoded[0].shape[0]))
        vector_hits, vector_available = _vector_side(odb, encoded, search, warnings, index)
    vector_ids = [h.memory_id for h in vector_hits]
    cosines = {h.memory_id: h.cosine for h in vector_hits}
    window = dated(odb, search.asked.plan, encoded if vector_available else None, text.window,
                   index)
    cosines.update(window)
    floor = None
    if encoded is not None and vector_available and search.params.min_similarity > 0:
        cosines.update(vectors.similarities(odb, encoded[0], embedder=encoded[1],
                                            ids=[m for m in text_ids if m not in cosines],
                                            index=index))
        floor = _floor(search, cosines, text_ids, vector_ids, set(window))
    read = {i.memory_id for i in text.inputs}
    more = recall_reads.rank_inputs(
        odb, [m for m in {*vector_ids, *text_ids, *window} if m not in read])
    inputs = [*text.inputs, *more]
    rows = {i.memory_id: i.row for i in inputs}
    timed = search.asked.timed
    # with a reranker, the fused top rerank_top_k (models/recall/rerank.py)
    spec = search.params.reranker
    wide = max(search.limit, search.params.rerank_top_k) if spec else search.limit
    with spans.span(names.SPAN_RECALL_FUSION) as traced:
        ranked = fuse(vector_ids, text_ids, {**text.features, **_features(odb, more, search.view)},
                      search.params, now, widened(wide, search.asked), favoured_types(search.text),
                      keep=both(floor, valid_keep(rows, search.asked) if timed else None),
                      dated_ids=list(window))
        ranked = after_fusion(odb, ranked, rows, search.asked,
                              lambda ids: _admit(odb, search, ids), wide)
        if spec:
            ranked = _reranked(odb, spec, search, ranked, rows, warnings)
        traced.set(names.COUNT, len(ranked))
    with spans.span(names.SPAN_RECALL_BUNDLE, {names.COUNT: len(ranked)}):
        found = recall_reads.assembly(odb, [r.memory_id for r in ranked], search.view,
                                      search.statuses, rows, text.nodes)
        parts = bundle_parts(found, ranked, cosines, {h.memory_id: h.bm25 for h in text_hits},
                             row_cache.current(odb))
    candidates = {"vector": len(vector_hits), "text": len(text_hits),
                  "belowFloor": sum(1 for i in inputs if floor and not floor(i.memory_id))}
    if vectors.approximate(index):
        candidates["approximate"] = 1  # the vector stage searched the index file
    return {**parts, "vector_available": vector_available, "candidates": candidates}


def _reranked(odb: OrchestratorDB, spec: str, search: _Search, ranked: list[Ranked],
              rows: dict[str, Any], warnings: list[str]) -> list[Ranked]:
    """The reranker's order of ``ranked`` (the fused order when it fails: a warning,
    logged); the first ``limit``."""
    missing = [r.memory_id for r in ranked if r.memory_id not in rows]
    rows = {**rows, **{i.memory_id: i.row for i in recall_reads.rank_inputs(odb, missing)}}
    before = len(warnings)
    ranked = rerank(spec, search.text, ranked, rows, warnings)
    if len(warnings) > before:
        odb.log.write("rerank_failed", reranker=spec, reason=warnings[-1][:300])
    return ranked[:search.limit]


def _admit(odb: OrchestratorDB, search: _Search, ids: list[str]) -> set[str]:
    """Those of ``ids`` (neighbours the plan adds, heads of Updates chains) that pass the
    recall's filters, its view (scope, sensitivity, tags) included."""
    ok = recall_reads.passing(odb, ids, search.statuses, search.types, search.view)
    if search.within is not None:
        ok &= set(search.within)
    if search.asked.timed and ok:
        rows = {i.memory_id: i.row for i in recall_reads.rank_inputs(odb, sorted(ok))}
        ok = {m for m in ok if valid_keep(rows, search.asked)(m)}
    return ok


def _floor(search: _Search, cosines: dict[str, float], text_ids: list[str],
           vector_ids: list[str], window: set[str]) -> Keep:
    """The relevance floor of this recall's candidates: a memory of the asked days is
    held to full text's lower bar; the router's plan makes it a gate (plans.py) and
    keeps the window list of a question that names days and nothing else."""
    found_by_text = {*text_ids, *window}
    floor = relevance_floor(cosines, found_by_text, search.params)
    plan = search.asked.plan
    if plan is not None and plan.answered_floor is not None:
        lower = relevance_floor(cosines, found_by_text, search.params, plan.answered_floor)
        floor = gate_floor(floor, lower, {*vector_ids, *found_by_text})
    if plan is not None and plan.window_only:
        floor = either(floor, window)
    return floor


def relevance_floor(cosines: dict[str, float], text_ids: set[str],
                    params: RetrievalSettings,
                    floors: tuple[float, float] | None = None) -> Callable[[str], bool]:
    """Whether a candidate is relevant enough to return
    (docs/concepts/recall.md#the-relevance-floor).

    Its cosine similarity to the query must reach ``min_similarity``, or, when full-text
    search found it too, ``min_similarity_text`` (``floors`` gives both instead: the
    plan's lower floor). A memory with no vector yet is kept when full text found it.
    ``min_similarity`` 0 turns the floor off (the caller's test): cosines can be negative.
    """
    alone, with_text = floors or (params.min_similarity, params.min_similarity_text)

    def keep(memory_id: str) -> bool:
        cosine = cosines.get(memory_id)
        if cosine is None:
            return memory_id in text_ids
        return cosine >= alone or (memory_id in text_ids and cosine >= with_text)
    return keep


def _vector_side(odb: OrchestratorDB, encoded: Encoded, search: _Search,
                 warnings: list[str], index: vectors.Searchable
                 ) -> tuple[list[vectors.VectorHit], bool]:
    query_vector, version = encoded

    def keep(ids: list[str]) -> set[str]:
        return recall_reads.passing(odb, ids, search.statuses, search.types, search.view)

    with spans.span(names.SPAN_RECALL_VECTOR) as traced:
        hits, total = vectors.search(odb, query_vector, embedder=version,
                                     limit=search.params.top_k_vector, keep=keep,
                                     within=search.within, index=index)
        traced.set(names.COUNT, len(hits))
    if total == 0:
        warnings.append(f"no embeddings yet for {version}; answered from full text")
        return [], False
    return hits, True


def _features(odb: OrchestratorDB, inputs: list[recall_reads.RankInputs], view: View
              ) -> dict[str, Features]:
    """The ranking features of ``inputs`` as ``view`` sees them; with a row cache, each
    memory's made once per view."""
    cache = row_cache.current(odb)
    if cache is None or not inputs:
        return _made_features(odb, inputs, view)
    by_id = {i.memory_id: i for i in inputs}
    held = cache.per_memory(("features", view.key()), list(by_id),
                            lambda missing: _made_features(odb, [by_id[m] for m in missing],
                                                           view))
    return {m: held[m] for m in by_id}


def _made_features(odb: OrchestratorDB, inputs: list[recall_reads.RankInputs], view: View
                   ) -> dict[str, Features]:
    """A memory is contradicted only by a newer memory ``view`` sees: a contradiction
    the reader may not see does not lower what it may (its score would tell of it)."""
    ids = [r.memory_id for r in inputs]
    found = contradictions(odb, ids) if ids else []
    newer = sorted({c.newer_id for c in found})
    shown = recall_reads.passing(odb, newer, ALL_STATUSES, None, view) if newer else set()
    penalized = contradicted(c for c in found if c.newer_id in shown)
    return {r.memory_id: Features(memory_id=r.memory_id, importance=r.importance,
                                  confidence=r.confidence, created_at=parse_ts(r.created_at),
                                  contradicted=r.memory_id in penalized,
                                  memory_type=r.type)
            for r in inputs}


def _empty(orchestrator_id: str, text: str, mode: str, started: float,
           warning: str) -> RecallBundle:
    return RecallBundle.model_construct(
        orchestrator_id=orchestrator_id, query=text, nodes=[], edges=[], neighbors=[],
        provenance=[], mode=mode, vector_available=False, candidates={"vector": 0, "text": 0},
        warnings=[warning], took_ms=round((time.perf_counter() - started) * 1000, 3))
