"""The registry of everything derived from memories, and the hard forget that runs it.

Each :class:`Derived` entry names one artifact that can hold a memory's words besides
its own row, where it lives (a table of ``memory.db``, a file under the orchestrator's
``memory/`` folder, the broker, or a reading process's memory) and what a hard forget
does to it. A hard forget (by id, by policy, by retention) runs every entry, in order:

- ``during``, inside the forget's write transaction, once per forgotten memory
  (:func:`forget_memory`, called by models/governance/edits.py after the row is emptied);
- ``after``, once the forget has committed (:func:`after_commit`, from ``apply_edit``,
  also on a redelivery): what lives outside the transaction (files, the WAL, the outbox);
- ``by_task``: the broker's parts and the bulletin snapshot, which the bulletin task
  writes; models cannot reach them, so tasks/forget.py runs one step per such entry
  (named by :attr:`Derived.name`, and a unit test keeps the two in step).

A new artifact derived from memories is a new entry here: tests/unit/governance/test_derived.py
compares the registry with the tables of memory.db and the files written under
``bulletins/``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from orchmem.config import OrchmemError, StorageError
from orchmem.models.bulletin import working
from orchmem.models.bulletin.compose import SNAPSHOT_JSON, SNAPSHOT_MD
from orchmem.models.core.shapes import format_ts, utc_now
from orchmem.models.execlog import archive as log_archive
from orchmem.models.governance import log_forget
from orchmem.models.governance.forget_files import delete_files, processed_files_with
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery import deadletters, manifest
from orchmem.models.storage.delivery.outbox import Outbox, prune_done
from orchmem.models.storage.execlog import redaction, tape
from orchmem.models.storage.execlog.archive import source_runs
from orchmem.models.storage.execlog.redaction import cited_events, runs_of_memory
from orchmem.models.storage.memories import rows as memories
from orchmem.models.storage.memories.forget import (
    checkpoint_wal,
    delete_sources,
    erase_row,
    scrub_audit,
)
from orchmem.models.storage.reflection import units as reflection
from orchmem.models.storage.search import ann, row_cache
from orchmem.models.storage.search.fts import optimize_index
from orchmem.models.storage.search.vectors import delete_embedding

logger = logging.getLogger(__name__)

Home = Literal["memory.db", "root", "broker", "process"]


@dataclass
class Forgetting:
    """One memory being hard-forgotten, inside the forget's write transaction."""

    odb: OrchestratorDB
    memory_id: str
    content: str
    #: Its content words (log_forget.content_words), for the texts that quote it.
    words: set[str]
    #: The log events its provenance cites, read before its sources go.
    cited: list[int]
    #: What went, by the result's ``erased`` names (counts, or the files' paths).
    erased: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Derived:
    """One artifact derived from memories and what a hard forget does to it."""

    name: str
    home: Home
    #: Tables of memory.db, paths under the orchestrator's ``memory/`` folder, or
    #: broker keys, as ``home`` says.
    where: tuple[str, ...]
    does: str
    during: Callable[[Forgetting], None] | None = None
    after: Callable[[OrchestratorDB, dict[str, Any]], dict[str, Any]] | None = None
    by_task: bool = False


# -- inside the transaction, per memory ------------------------------------------------


def _dead_letters(f: Forgetting) -> None:
    f.erased["deadLetters"] = deadletters.erase_mentioning([f.content])


def _log_archive(f: Forgetting) -> None:
    # Before "sources": the runs its sources name are read here.
    runs = {*source_runs(f.odb, f.memory_id), *runs_of_memory(f.odb, f.memory_id)}
    f.erased["archivedEvents"] = log_archive.redact_archives(f.odb, runs, f.words,
                                                             "forget_hard")


def _sources(f: Forgetting) -> None:
    delete_sources(f.memory_id)


def _vector(f: Forgetting) -> None:
    delete_embedding(f.memory_id)  # moves the deletes counter: readers drop their matrix


def _audit(f: Forgetting) -> None:
    scrub_audit(f.memory_id)


def _topics(f: Forgetting) -> None:
    reflection.scrub_topics(f.memory_id)


def _insights(f: Forgetting) -> None:
    reflection.scrub_insights(f.memory_id)


def _proposals(f: Forgetting) -> None:
    reflection.scrub_proposals(f.memory_id)


def _crystals(f: Forgetting) -> None:
    for crystal in reflection.drop_quoting_crystals(f.memory_id):
        stored = memories.get(crystal)
        if stored is None or stored.forgotten:
            continue
        for name, value in forget_memory(f.odb, stored).items():
            f.erased[name] = f.erased.get(name, 0 if isinstance(value, int) else []) + value


def _log_and_episodes(f: Forgetting) -> None:
    logged = log_forget.forget_memory(f.odb, f.memory_id, f.cited, f.words,
                                      format_ts(utc_now()))
    f.erased["logEvents"] = logged["events"]
    f.erased["episodes"] = logged["episodes"]


def _log_snapshots(f: Forgetting) -> None:
    # Its snapshots lose their words (the tombstone's snapshot follows with the forget's
    # audit event); its edges' reasons leave its neighbours' snapshots.
    seqs = tape.snapshot_seqs(f.memory_id)
    f.erased["logSnapshots"] = redaction.redact_events(
        f.odb, seqs, format_ts(utc_now()), "forget_hard")[0] if seqs else 0
    tape.drop_edge_reasons(f.memory_id, tape.neighbours_of(f.memory_id))


def _fts(f: Forgetting) -> None:
    # Merging every segment drops the deleted tokens; until then they stay in the index.
    optimize_index(f.odb)


def _row_cache_now(f: Forgetting) -> None:
    row_cache.evict(f.odb)


# -- after the commit, once per edit ---------------------------------------------------


def _row_cache(odb: OrchestratorDB, erased: dict[str, Any]) -> dict[str, Any]:
    # Again: a recall of this process may have filled it from an older snapshot.
    row_cache.evict(odb)
    return {}


def _ann_index(odb: OrchestratorDB, erased: dict[str, Any]) -> dict[str, Any]:
    ann.after_forget(odb)
    return {}


def _processed_files(odb: OrchestratorDB, erased: dict[str, Any]) -> dict[str, Any]:
    try:
        delete_files(odb.workspace, erased.get("files", []))
    except OSError as exc:
        logger.warning("processed files of %s not deleted after a hard forget: %s",
                       odb.orchestrator_id, exc)
        odb.log.write("forget_files_failed", message=str(exc)[:300])
    return {}


def _wal(odb: OrchestratorDB, erased: dict[str, Any]) -> dict[str, Any]:
    if not checkpoint_wal(odb):
        logger.warning("WAL of %s still held by a reader after a hard forget",
                       odb.orchestrator_id)
        odb.log.write("forget_checkpoint_blocked")
    return {}


def _outbox(odb: OrchestratorDB, erased: dict[str, Any]) -> dict[str, Any]:
    outbox = Outbox(odb.workspace.outbox_path, odb.settings.worker.busy_timeout_ms)
    try:
        prune_done(outbox, odb, erase=True)
    except StorageError as exc:
        # The reconciler prunes them on its next run; the forget itself has committed.
        logger.warning("outbox of %s not erased after a hard forget: %s",
                       odb.orchestrator_id, exc)
        odb.log.write("forget_outbox_failed", message=str(exc)[:300])
    finally:
        outbox.close()
    return {}


def _working(odb: OrchestratorDB, erased: dict[str, Any]) -> dict[str, Any]:
    """Rebuild working.md from the committed database (fsynced, under its lock), so a
    prompt never shows the forgotten text again; deleted when the rebuild fails (the
    next reflection writes it again)."""
    path = working.path_of(odb)
    if not path.exists():
        return {"working": "none"}
    try:
        working.refresh(odb, utc_now(), force=True)
    except (OrchmemError, OSError) as exc:
        logger.warning("working.md of %s not rebuilt after a hard forget: %s",
                       odb.orchestrator_id, type(exc).__name__)
        path.unlink(missing_ok=True)
        return {"working": f"deleted (rebuild failed: {type(exc).__name__})"}
    return {"working": "rebuilt"}


REGISTRY: tuple[Derived, ...] = (
    Derived("dead letters", "memory.db", ("dead_letters",),
            "rows whose payload holds the content are deleted", during=_dead_letters),
    Derived("log archive", "root", (f"{log_archive.FOLDER}/log-*.jsonl",),
            "archived events of the runs it cites or its episodes name, and those quoting "
            "all its content words, lose their text and data (marked redacted)",
            during=_log_archive),
    Derived("sources", "memory.db", ("memory_sources",), "deleted", during=_sources),
    Derived("vectors", "memory.db", ("memory_embeddings",),
            "the vector is deleted; every reader drops its cached matrix (the deletes "
            "counter moved)", during=_vector),
    Derived("vector index file", "root", (ann.FILE_NAME, ann.HEADER_NAME),
            "the vectors deleted since it was written (the forgotten one) are removed and "
            "the file rewritten without them (deleted when it cannot be read)",
            after=_ann_index),
    Derived("audit trail", "memory.db", ("memory_events", "memory_edges"),
            "events naming it lose their reason and content fields, edges touching it "
            "their reason", during=_audit),
    Derived("topics", "memory.db", ("memory_topics",),
            "its topic is deleted for every memory in it", during=_topics),
    Derived("insights", "memory.db", ("insights",),
            "insights naming it lose their reason", during=_insights),
    Derived("proposals", "memory.db", ("proposals",),
            "proposals naming it lose their reason and topic", during=_proposals),
    Derived("crystals", "memory.db", ("crystals",),
            "every memory it is part of (a PartOf edge from it: a crystal of its topic, "
            "the summary of the exchange it was said in) is hard-forgotten too",
            during=_crystals),
    Derived("execution log and episodes", "memory.db",
            ("log_events", "episodes", "episode_memories", "episode_fts"),
            "cited events redacted, episodes rebuilt or their quoting words replaced, "
            "episode_fts merged", during=_log_and_episodes),
    Derived("memory snapshots on the log", "memory.db", ("log_events",),
            "its snapshots (a rebuild's source) lose their words, marked redacted; its "
            "edges' reasons leave the snapshots of the memories at their other end (a "
            "subject another memory took from it leaves that one's, with its row)",
            during=_log_snapshots),
    Derived("full-text index", "memory.db", ("memory_fts",),
            "merged (optimize) so no segment keeps its tokens", during=_fts),
    Derived("row cache", "process", ("recall row cache",),
            "dropped in the transaction and again after the commit",
            during=_row_cache_now, after=_row_cache),
    Derived("processed ingest files", "root", ("ingest/processed/",),
            "the files it came from (by the manifest's sha256) are deleted",
            after=_processed_files),
    Derived("WAL", "root", ("memory.db-wal",),
            "checkpointed and truncated (zeroed pages leave the log file)", after=_wal),
    Derived("outbox", "root", ("outbox.db",), "finished entries erased", after=_outbox),
    Derived("working memory", "root", (f"bulletins/{working.FILE_NAME}",),
            "rebuilt from the committed database, fsynced", after=_working),
    Derived("bulletin snapshot", "root",
            (f"bulletins/{SNAPSHOT_JSON}", f"bulletins/{SNAPSHOT_MD}"),
            "rebuilt at once, fsynced (deleted when the rebuild fails)", by_task=True),
    Derived("task results", "broker", ("celery-task-meta-<orchestratorId>/*",),
            "every stored result of the orchestrator is deleted", by_task=True),
    Derived("append-only file", "broker", ("appendonly.aof",),
            "BGREWRITEAOF is asked for", by_task=True),
)


def forget_memory(odb: OrchestratorDB, stored: memories.StoredMemory) -> dict[str, Any]:
    """Hard-forget ``stored`` inside the caller's write: empty its row, then run the
    ``during`` step of every entry. Returns what went (``deadLetters``, ``files``,
    ``logEvents``, ``episodes``); the caller records the tombstone event."""
    memory_id = stored.memory_id
    forgetting = Forgetting(odb, memory_id, stored.content,
                            log_forget.content_words(stored.content),
                            list(cited_events(odb, memory_id)))
    forgetting.erased["files"] = processed_files_with(odb.workspace,
                                                      manifest.hashes_of(memory_id))
    erase_row(memory_id)
    for entry in REGISTRY:
        if entry.during is not None:
            entry.during(forgetting)
    return forgetting.erased


def after_commit(odb: OrchestratorDB, erased: dict[str, Any]) -> dict[str, Any]:
    """Run the ``after`` step of every entry once a hard forget has committed
    (``erased``: its result's). Returns what the steps report (``working``)."""
    reported: dict[str, Any] = {}
    for entry in REGISTRY:
        if entry.after is not None:
            reported.update(entry.after(odb, erased))
    return reported


def task_steps() -> tuple[str, ...]:
    """The names of the entries tasks/forget.py runs."""
    return tuple(entry.name for entry in REGISTRY if entry.by_task)
