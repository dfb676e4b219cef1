"""The projection watermark: how far derived data lags behind the log.

The log's watermark is its last seq, when it was recorded and the log's schema
version. Each projection reports how far behind it is, in its own unit:

- ``episodes``: ended runs whose episode does not cover their last event, and the end
  time of the oldest one;
- ``vectors``: live memories without a vector (the re-embed job fills them in);
- ``fts``: memories the full-text index does not hold (kept by triggers in the same
  transaction: anything but 0 is damage);
- ``bulletin``: memory changes (audit events) after the last bulletin snapshot.

:func:`lag_warnings` turns the lags over ``memory.log.max_projection_lag`` into the
warnings recall adds to its bundle.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from orchmem.models.execlog.rules import LOG_SCHEMA_VERSION
from orchmem.models.storage.execlog.entries import has_log

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB


def projection_status(odb: OrchestratorDB) -> dict[str, Any]:
    """The log's watermark and each projection's lag (read in one snapshot)."""
    with odb.read():
        status: dict[str, Any] = {"log": _log_mark(odb), "episodes": _episode_lag(odb)}
        live, vectors = odb.sql("SELECT (SELECT count(*) FROM memories WHERE forgotten = 0), "
                                "(SELECT count(*) FROM memory_embeddings)")[0]
        status["vectors"] = {"behindMemories": max(0, int(live) - int(vectors))}
        indexed = odb.sql("SELECT (SELECT count(*) FROM memories), "
                          "(SELECT count(*) FROM memory_fts_docsize)")[0]
        status["fts"] = {"behindMemories": max(0, int(indexed[0]) - int(indexed[1]))}
        status["bulletin"] = _bulletin_lag(odb)
    return status


def _log_mark(odb: OrchestratorDB) -> dict[str, Any]:
    if not has_log(odb):
        return {"seq": 0, "recordedAt": None, "schemaVersion": None}
    rows = odb.sql("SELECT seq, recorded_at FROM log_events ORDER BY seq DESC LIMIT 1")
    seq, at = rows[0] if rows else (0, None)
    return {"seq": int(seq), "recordedAt": at, "schemaVersion": LOG_SCHEMA_VERSION}


def _episode_lag(odb: OrchestratorDB) -> dict[str, Any]:
    if not has_log(odb):
        return {"behindRuns": 0, "oldestBehindEndedAt": None}
    count, oldest = odb.sql(
        "SELECT count(*), min(ended_at) FROM log_runs WHERE status = 'ended'")[0]
    episodes = odb.sql("SELECT count(*), max(last_seq) FROM episodes")[0]
    return {"behindRuns": int(count), "oldestBehindEndedAt": oldest,
            "episodes": int(episodes[0]), "watermarkSeq": int(episodes[1] or 0)}


def _bulletin_lag(odb: OrchestratorDB) -> dict[str, Any]:
    path = odb.workspace.bulletins_dir / "latest.json"
    try:
        generated = str(json.loads(path.read_text(encoding="utf-8"))["generatedAt"])
    except (OSError, ValueError, KeyError, TypeError):
        generated = None
    if generated is None:
        behind = int(odb.sql("SELECT count(*) FROM memory_events")[0][0])
    else:
        behind = int(odb.sql("SELECT count(*) FROM memory_events WHERE at > ?",
                             (generated,))[0][0])
    return {"generatedAt": generated, "behindChanges": behind}


#: Seconds a process reuses its last lag check (two counts over the memories): recall
#: pays them at most this often, not on every query.
LAG_CHECK_EVERY_S = 5.0


def recall_watermark(odb: OrchestratorDB, bound: int) -> tuple[dict[str, Any], list[str]]:
    """What a recall bundle reports: the log's seq now, the lags of its sources
    (episodes, vectors; counted at most every LAG_CHECK_EVERY_S seconds per process),
    and one warning per lag over ``bound``."""
    now = time.monotonic()
    cached = odb.cache.get("recall_lags")
    if cached is None or now - cached[0] >= LAG_CHECK_EVERY_S:
        cached = (now, _recall_lags(odb))
        odb.cache["recall_lags"] = cached
    lags: dict[str, int] = cached[1]
    seq = odb.sql("SELECT seq FROM log_events ORDER BY seq DESC LIMIT 1") \
        if has_log(odb) else []
    mark = {"logSeq": int(seq[0][0]) if seq else 0, **lags,
            "schemaVersion": LOG_SCHEMA_VERSION}
    warnings = []
    if lags["episodesBehindRuns"] > bound:
        warnings.append(f"episodes lag the execution log by {lags['episodesBehindRuns']} "
                        f"runs (memory.log.max_projection_lag = {bound})")
    if lags["vectorsBehindMemories"] > bound:
        warnings.append(f"vectors lag the memories by {lags['vectorsBehindMemories']} "
                        f"(memory.log.max_projection_lag = {bound}); those are found by "
                        "full text only until the re-embed job runs")
    return mark, warnings


def lag_warnings(odb: OrchestratorDB, bound: int) -> list[str]:
    """The warnings of :func:`recall_watermark`."""
    return recall_watermark(odb, bound)[1]


def _recall_lags(odb: OrchestratorDB) -> dict[str, int]:
    episodes = int(odb.sql("SELECT count(*) FROM log_runs WHERE status = 'ended'")[0][0]) \
        if has_log(odb) else 0
    live, vectors = odb.sql("SELECT (SELECT count(*) FROM memories WHERE forgotten = 0), "
                            "(SELECT count(*) FROM memory_embeddings)")[0]
    return {"episodesBehindRuns": episodes,
            "vectorsBehindMemories": max(0, int(live) - int(vectors))}
