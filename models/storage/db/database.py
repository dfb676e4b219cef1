"""Opening one orchestrator's memory.db: pragmas, integrity check, schema, fork guard.

``Databases(settings)`` is a per-process registry: one :class:`OrchestratorDB` per
orchestratorId, created on first use and kept. A handle remembers the process that
opened it and refuses to be used from another one (a forked worker child must open
its own: SQLite connections must never cross ``fork``).

Every write is ``db.atomic("IMMEDIATE")``: the write lock is taken at BEGIN, so a
writer waits up to ``busy_timeout`` instead of failing on a read-to-write upgrade.
Errors of the driver are turned into ours where they enter: ``StorageError`` for
locked/full/read-only, ``MemoryCorrupt`` for a damaged file.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import peewee
from peewee import SqliteDatabase

from orchmem.config import (
    MemoryCorrupt,
    MemoryDisabled,
    MemorySettings,
    MemoryValidationError,
    Settings,
    StorageError,
    check_orchestrator_id,
)
from orchmem.config.governance import SECRET_RULES
from orchmem.models.recall.overlap import Overlap
from orchmem.models.storage.db.degraded import check_not_degraded, degraded_info
from orchmem.models.storage.db.integrity import check_not_disabled, verify
from orchmem.models.storage.schema.governance_kept import detector_rules
from orchmem.models.storage.schema.migrations import migrate
from orchmem.models.storage.schema.steps_governance import legacy_view
from orchmem.models.storage.schema.tables import (
    TABLES,
    MetaRow,
    create_schema,
)
from orchmem.models.telemetry import names, spans
from orchmem.models.workspace.folders import Workspace
from orchmem.models.workspace.memlog import MemoryLog
from orchmem.models.workspace.private import private_database

logger = logging.getLogger(__name__)
T = TypeVar("T")


class GuardedSqliteDatabase(SqliteDatabase):
    """A SqliteDatabase that refuses to hand out a connection in another process.
    ``secret_rules``: the secret detector's rules its orchestrator writes with (none
    when the detector is off), which a file older than schema 3 is read with."""

    def __init__(self, *args: Any, secret_rules: Sequence[str] = SECRET_RULES,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.owner_pid = os.getpid()
        self.secret_rules = tuple(secret_rules)
        #: The orchestrator whose file this is (set by OrchestratorDB).
        self.orchestrator_id: str | None = None

    def _check_process(self) -> None:
        if os.getpid() != self.owner_pid:
            raise StorageError(
                f"database {self.database} was opened in process {self.owner_pid} and used in "
                f"process {os.getpid()}: SQLite connections must not cross fork; "
                "open it again in this process"
            )

    def connection(self) -> Any:
        self._check_process()
        return super().connection()

    def cursor(self, named_cursor: Any = None) -> Any:
        self._check_process()
        return super().cursor(named_cursor)

    def begin(self, *args: Any, **kwargs: Any) -> Any:
        self._check_process()
        return super().begin(*args, **kwargs)

    def _add_conn_hooks(self, conn: Any) -> None:
        super()._add_conn_hooks(conn)  # type: ignore[misc]
        # a file older than schema 3 reads through a view with the kept governance
        legacy_view(conn, self.secret_rules)

    def rollback(self) -> None:
        # After SQLITE_FULL or an I/O error SQLite has already rolled the transaction
        # back; a second ROLLBACK would fail and its error would replace the real one.
        if not self.is_closed() and not self.connection().in_transaction:
            return
        super().rollback()


@dataclass
class OrchestratorDB:
    """One orchestrator's open database in this process, with its log and settings."""

    workspace: Workspace
    db: GuardedSqliteDatabase
    log: MemoryLog
    memory: MemorySettings
    settings: Settings
    #: Per-process caches derived from this database (the vector index).
    cache: dict[str, Any] = field(default_factory=dict, repr=False)
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def __post_init__(self) -> None:
        # the statements that run on the bound database alone (the tape's eventIds) read it
        self.db.orchestrator_id = self.workspace.orchestrator_id

    @property
    def orchestrator_id(self) -> str:
        return self.workspace.orchestrator_id

    @contextmanager
    def bound(self) -> Iterator[None]:
        """Bind the table classes to this database, in this thread, for the block."""
        self._not_borrowing()
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        self._local.depth = 1
        try:
            # Every table is listed, so following references (bind_refs) adds nothing
            # but a walk of the model graph on each call.
            with self.db.bind_ctx(TABLES, bind_refs=False, bind_backrefs=False), \
                    sqlite_errors(self):
                yield
        finally:
            self._local.depth = 0

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[None]:
        """One IMMEDIATE write transaction, tables bound: commits or rolls back as a whole.

        Raises MemoryDegraded while a failed migration left the memory read-only. A
        write nested in one (a savepoint) is not checked again: the outer one holds the
        write lock, which a migration needs to leave the marker.

        ``durable=False`` (an outermost write only): its commit does not wait for the
        disk (``synchronous=NORMAL`` for this transaction, in WAL mode): it survives a
        crash of the process, the next durable commit makes it durable as well (the WAL
        is synced as a whole), and only a power loss before that may undo it. For a
        delivery's count, which guards against crashing workers
        (:mod:`orchmem.models.storage.delivery.receipts`)."""
        writing = getattr(self._local, "writing", 0)
        if not writing:
            check_not_degraded(self.workspace)
        relax = not durable and not writing and \
            self.settings.worker.sqlite_synchronous == "FULL"
        self._local.writing = writing + 1
        try:
            if relax:
                self.db.execute_sql("PRAGMA synchronous = NORMAL")
            with self._traced(writing), self.bound(), self.db.atomic("IMMEDIATE"):
                yield
        finally:
            self._local.writing = writing
            if relax:
                self.db.execute_sql("PRAGMA synchronous = FULL")

    def _traced(self, writing: int) -> spans.Span:
        """The span of an outermost write transaction, its commit included."""
        if writing:
            return spans.NO_SPAN
        return spans.span(names.SPAN_TRANSACTION, {
            names.DB_SYSTEM: names.DB_SYSTEM_VALUE, names.DB_OPERATION: "transaction",
            names.ORCHESTRATOR: self.orchestrator_id})

    @contextmanager
    def read(self) -> Iterator[None]:
        """A read transaction: every query in the block sees one snapshot."""
        with self.bound(), self.db.atomic():
            yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """:meth:`read` for a block of raw statements (:meth:`sql`) only: one snapshot,
        without binding the table classes (binding and unbinding all of them costs a
        recall about 0.2 ms). Code inside that uses the table classes binds them itself
        (:meth:`bound`)."""
        self._not_borrowing()
        with sqlite_errors(self), self.db.atomic():
            outer = self.memo()
            if outer is None:
                self._local.memo = {}
            try:
                yield
            finally:
                self._local.memo = outer

    def writing(self) -> bool:
        """Whether this thread is inside a :meth:`write` transaction."""
        return bool(getattr(self._local, "writing", 0))

    def memo(self) -> dict[str, Any] | None:
        """Inside a :meth:`snapshot` (or a job borrowing it), a dict for what cannot
        change within one snapshot (the file's columns: a read transaction sees one
        schema), kept until the snapshot ends; elsewhere None."""
        return getattr(self._local, "memo", None)

    def sql(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read query and fetch all rows (no table binding needed); on a thread
        running a :meth:`borrowing` job, on the lender's connection."""
        lent = getattr(self._local, "lent", None)
        with sqlite_errors(self):
            if lent is not None:
                return lent.execute(query, params).fetchall()
            return list(self.db.execute_sql(query, params).fetchall())

    def borrowing(self, job: Callable[[], T]) -> Callable[[], T]:
        """``job`` made to run on another thread with this thread's connection, inside
        this thread's open :meth:`snapshot`: its statements (:meth:`sql`) see that one
        snapshot. This thread must not use the connection until the job has returned
        (recall waits for it while it embeds the query; the connections are opened
        with ``check_same_thread=False`` and are never used by two threads at once).
        The job may read with :meth:`sql` only: :meth:`bound`, :meth:`read` and
        :meth:`snapshot` would open the other thread's own connection, outside the
        snapshot, and refuse."""
        if not self.db.in_transaction():
            raise RuntimeError("borrowing() needs this thread's open snapshot()")
        connection = self.db.connection()
        memo = self.memo()

        def run() -> T:
            # On a helper, or on this very thread when the helpers were shut down.
            own = self.memo()
            self._local.lent = connection
            self._local.memo = memo
            try:
                return job()
            finally:
                del self._local.lent
                self._local.memo = own
        return run

    def _not_borrowing(self) -> None:
        if getattr(self._local, "lent", None) is not None:
            raise RuntimeError("a job on a borrowed connection reads with sql() only: "
                               "a transaction here would be another snapshot")

    def meta(self, key: str, default: str | None = None) -> str | None:
        with self.bound():
            row = MetaRow.get_or_none(MetaRow.key == key)
            return row.value if row is not None else default

    def close(self) -> None:
        """Close this thread's connection (rolling back a transaction left open)."""
        if os.getpid() != self.db.owner_pid or self.db.is_closed():
            return
        try:
            if self.db.in_transaction():
                self.db.rollback()
        except peewee.DatabaseError:
            pass
        finally:
            self.db.close()


@contextmanager
def sqlite_errors(odb: OrchestratorDB) -> Iterator[None]:
    """Turn driver errors into StorageError / MemoryCorrupt, naming the orchestrator."""
    try:
        yield
    except peewee.DatabaseError as exc:
        raise _wrap(odb.workspace, exc) from exc
    except sqlite3.DatabaseError as exc:
        raise _wrap(odb.workspace, exc) from exc


def _wrap(workspace: Workspace, exc: Exception) -> Exception:
    text = str(exc)
    lowered = text.lower()
    if "malformed" in lowered or "not a database" in lowered or "corrupt" in lowered:
        return MemoryCorrupt(
            f"memory.db of orchestrator {workspace.orchestrator_id!r} is damaged ({text}); "
            f"memory is disabled for it. Run `orchmem check` for details ({workspace.db_path})"
        )
    if isinstance(exc, peewee.IntegrityError | sqlite3.IntegrityError):
        return StorageError(f"integrity constraint failed in {workspace.db_path}: {text}")
    hint = ""
    if "locked" in lowered or "busy" in lowered:
        hint = "; another process held the write lock past busy_timeout_ms"
    elif "full" in lowered:
        hint = "; the disk is full: free space, nothing committed was lost"
    elif "readonly" in lowered or "read-only" in lowered:
        hint = "; the folder or file is read-only: fix its permissions"
    return StorageError(
        f"SQLite error on memory of {workspace.orchestrator_id!r} ({workspace.db_path}): "
        f"{text}{hint}"
    )


class Databases:
    """Per-process registry of open orchestrator databases.

    ``open(orchestrator_id)`` returns the cached handle, opening (and on first use
    creating) the database; a file of an earlier schema is migrated at open
    (migrations.py). A handle made before a ``fork`` is never reused after it.

    ``readonly=True`` is a reader's registry (the client, the CLI's reads): files are
    opened ``mode=ro``, so a reader never creates, migrates or changes one (a missing
    file stays missing, even when a damaged one was just moved aside), and a cached
    handle is dropped as soon as its orchestrator is disabled by a quarantine marker.
    """

    def __init__(self, settings: Settings, *, readonly: bool = False) -> None:
        self.settings = settings
        self.readonly = readonly
        self._pid = os.getpid()
        self._open: dict[str, OrchestratorDB] = {}
        self._lock = threading.Lock()
        self._overlap = Overlap()

    def _check_pid(self) -> None:
        if os.getpid() != self._pid:
            # Inherited from a parent: forget, do not close (the parent owns them).
            self._open = {}
            self._lock = threading.Lock()
            self._overlap = Overlap()  # the parent's threads did not cross the fork
            self._pid = os.getpid()

    @property
    def overlap(self) -> Overlap:
        """The helper threads of this process's recalls (models/recall/overlap.py), started
        on first use and shut down by :meth:`close_all`."""
        self._check_pid()
        return self._overlap

    def workspace(self, orchestrator_id: str) -> Workspace:
        return Workspace.for_orchestrator(self.settings, orchestrator_id)

    def open(self, orchestrator_id: str, *, create: bool = True,
             migrate_up: bool = True) -> OrchestratorDB | None:
        """The orchestrator's database, or None when it does not exist and ``create`` is False.
        ``migrate_up=False`` leaves an older file's schema alone (``orchmem migrate --to``).

        Raises MemoryDisabled (switched off, or disabled after corruption), MemoryCorrupt
        (integrity check failed now), MemoryValidationError (an id that differs only in
        case from an existing orchestrator's) or StorageError.
        """
        self._check_pid()
        check_orchestrator_id(orchestrator_id)
        cached = self._open.get(orchestrator_id)
        if cached is not None:
            if self.readonly:
                self._check_still_enabled(cached)
            return cached
        with self._lock:
            cached = self._open.get(orchestrator_id)
            if cached is not None:
                return cached
            workspace = self.workspace(orchestrator_id)
            memory = self.settings.memory_for(orchestrator_id)
            if not memory.enabled:
                raise MemoryDisabled(
                    f"memory is disabled for orchestrator {orchestrator_id!r} by settings "
                    "(memory.enabled = false)"
                )
            check_not_disabled(workspace)
            if not workspace.db_path.exists():
                if not create or self.readonly:
                    return None
                workspace.check_no_case_twin()
                workspace.ensure()
                _create_database(workspace, self.settings)
            odb = OrchestratorDB(
                workspace=workspace,
                db=_connect(workspace.db_path, self.settings, readonly=self.readonly,
                            secret_rules=detector_rules(memory)),
                log=MemoryLog(
                    workspace.log_path,
                    orchestrator_id,
                    int(self.settings.memory_log_max_mb * 1024 * 1024),
                    self.settings.memory_log_backups,
                ),
                memory=memory,
                settings=self.settings,
            )
            try:
                verify(odb)
                # A degraded orchestrator is not migrated again at every open: only
                # `orchmem migrate` retries (degraded.py).
                if not self.readonly and migrate_up and degraded_info(workspace) is None:
                    migrate(odb)
            except BaseException:
                odb.close()  # a connection left open would pin SQLite's view of the file
                raise
            self._open[orchestrator_id] = odb
            return odb

    def _check_still_enabled(self, odb: OrchestratorDB) -> None:
        """A reader's cached handle must not outlive a quarantine (a stat, not a query)."""
        try:
            check_not_disabled(odb.workspace)
        except MemoryDisabled:
            self.evict(odb.orchestrator_id)
            raise

    def evict(self, orchestrator_id: str) -> None:
        """Drop (and close) the cached handle, e.g. after the database was disabled."""
        self._check_pid()
        odb = self._open.pop(orchestrator_id, None)
        if odb is not None:
            odb.close()

    def close_all(self) -> None:
        """Close every handle of this thread and stop the helper threads (a later use
        opens and starts them again)."""
        self._check_pid()
        self._overlap.shutdown()
        for orchestrator_id in list(self._open):
            self.evict(orchestrator_id)


def optimize_and_checkpoint(odb: OrchestratorDB) -> list[int]:
    """``PRAGMA optimize`` and a truncating WAL checkpoint; returns the checkpoint's
    ``[busy, log frames, checkpointed frames]`` (busy = 1: a reader held it back)."""
    odb.sql("PRAGMA optimize")
    return [int(v) for v in odb.sql("PRAGMA wal_checkpoint(TRUNCATE)")[0]]


def known_orchestrators(settings: Settings) -> list[str]:
    """Orchestrators registered in settings or with a folder under ``<root>/orchestrators``."""
    found = set(settings.orchestrators)
    base = settings.root / "orchestrators"
    if base.is_dir():
        for entry in base.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                try:
                    found.add(check_orchestrator_id(entry.name))
                except MemoryValidationError:
                    logger.warning("ignoring folder with an invalid orchestratorId: %s", entry)
    return sorted(found)


def pragmas(settings: Settings) -> list[tuple[str, Any]]:
    return [
        ("journal_mode", "wal"),
        # Freed pages are zeroed; the WAL's copies go when a hard forget checkpoints it.
        ("secure_delete", 1),
        ("busy_timeout", settings.worker.busy_timeout_ms),
        ("foreign_keys", 1),
        ("synchronous", settings.worker.sqlite_synchronous),
        ("cache_size", -16_000),  # KiB
        ("temp_store", "memory"),
        ("mmap_size", 256 * 1024 * 1024),
        # Bounds the WAL after a checkpoint: it must not grow without limit under
        # steady reads (the WAL's size stays bounded).
        ("journal_size_limit", 64 * 1024 * 1024),
    ]


#: Pragmas a read-only connection may set (the rest are the writer's, persistent or moot).
_READER_PRAGMAS = frozenset({"busy_timeout", "cache_size", "temp_store", "mmap_size"})


def _connect(path: Path, settings: Settings, *, readonly: bool = False,
             secret_rules: Sequence[str] = SECRET_RULES) -> GuardedSqliteDatabase:
    common: dict[str, Any] = {"timeout": settings.worker.busy_timeout_ms / 1000,
                              "check_same_thread": False, "secret_rules": secret_rules}
    if readonly:
        # mode=ro: opening a missing file fails instead of creating an empty database.
        return GuardedSqliteDatabase(
            f"file:{quote(str(path))}?mode=ro", uri=True,
            pragmas=[p for p in pragmas(settings) if p[0] in _READER_PRAGMAS], **common)
    return GuardedSqliteDatabase(str(path), pragmas=pragmas(settings), **common)


def _create_database(workspace: Workspace, settings: Settings) -> None:
    """Build the schema in a side file, then link it into place.

    memory.db therefore never exists half-made: a zero-byte or headerless memory.db is
    always damage, never a database being created. Two processes creating at once: one
    link wins, the other discards its copy.
    """
    tmp = workspace.memory_dir / f".memory.db.init-{os.getpid()}-{threading.get_ident()}"
    tmp.unlink(missing_ok=True)
    private_database(tmp)  # 0600; memory.db is this file linked into place
    db = GuardedSqliteDatabase(str(tmp), pragmas=[("journal_mode", "delete")])
    try:
        with db.atomic("IMMEDIATE"):
            create_schema(db, workspace.orchestrator_id)
        db.close()
        os.link(tmp, workspace.db_path)
    except FileExistsError:
        pass
    except (OSError, peewee.DatabaseError) as exc:
        raise StorageError(
            f"cannot create {workspace.db_path} for orchestrator "
            f"{workspace.orchestrator_id!r}: {exc}"
        ) from exc
    finally:
        if not db.is_closed():
            db.close()
        tmp.unlink(missing_ok=True)


