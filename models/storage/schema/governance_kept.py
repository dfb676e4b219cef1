"""What schema 3's down step keeps so that the way back up restores every memory's
governance, and the secret detector for the memories that come back without it.

A down step below 3 drops the governance columns. Before it does, it copies them, as
they were, into the side table ``governance_kept`` (one row per memory, keyed by
``memory_id``), in the downgrade's own transaction. An older release ignores a table it
does not know, so the rows survive its writer; memories it writes have no row, and rows
of memories it hard-deletes are never read. The up step to 3 puts the kept values back
(:func:`restore`), then drops the table, so a migrated file's schema is a new file's.

A memory that comes back without kept governance (written by an older release, or by
one before schema 3, or in a file whose side table was lost) gets the defaults, except
that the secret detector runs on its text: one that holds a secret comes back
restricted (:func:`restrict_secrets`), as a write would have stored it. Readers of a
file below 3 see the same (steps_governance.legacy_view: the kept values through
:func:`copy_for_reader`, else the detector's verdict through :func:`holds_secret`).

What the side table cannot do: the release the file goes down to has no governance at
all, so its reads serve a restricted or a session memory to every caller, and a release
of a schema between 3 and this one migrates the file up without reading the table.
:func:`what_would_be_lost` names what is at stake, and ``downgrade`` refuses to go
below 3 without ``force`` while any memory is more sensitive than internal or not
global (migrations.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from orchmem.config import MemorySettings
from orchmem.config.governance import SECRET_RULES
from orchmem.models.writeback.secrets import find_secrets

if TYPE_CHECKING:
    from orchmem.models.storage.db.database import OrchestratorDB

#: The side table (in the file) and a reader connection's copy of it (TEMP: not in the
#: file, so the up step dropping the table never breaks a reader's view).
TABLE = "governance_kept"
READER_COPY = "governance_kept_copy"
#: The governance columns of ``memories`` the side table keeps, in table order.
KEPT_COLUMNS = ("tier", "scope", "session_id", "project_id", "sensitivity", "tags",
                "metadata")
_NAMES = ", ".join(f'"{c}"' for c in KEPT_COLUMNS)
_DDL = ('CREATE TABLE {where}"{table}" ("memory_id" VARCHAR(255) NOT NULL PRIMARY KEY, '
        + ", ".join(f'"{c}" TEXT' for c in KEPT_COLUMNS) + ") WITHOUT ROWID")
#: The SQL function a reader's view calls on a memory's content and summary.
SECRET_FUNCTION = "orchmem_holds_secret"


def detector_rules(memory: MemorySettings) -> tuple[str, ...]:
    """The detector's rules an orchestrator writes with (none when it is off)."""
    governance = memory.governance
    return tuple(governance.secret_rules) if governance.secret_detector else ()


def has_table(db: sqlite3.Connection | OrchestratorDB) -> bool:
    """True when the file holds the side table (on a connection or an ``odb``)."""
    query = "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?"
    if isinstance(db, sqlite3.Connection):
        return db.execute(query, (TABLE,)).fetchone() is not None
    return db.db.execute_sql(query, (TABLE,)).fetchone() is not None


def keep(odb: OrchestratorDB) -> None:
    """Inside the downgrade's transaction, before the columns go: every memory's
    governance as it is now. A table left by a release whose up step did not read it is
    replaced: the columns about to be dropped are the truth."""
    odb.db.execute_sql(f'DROP TABLE IF EXISTS main."{TABLE}"')
    odb.db.execute_sql(_DDL.format(where="main.", table=TABLE))
    odb.db.execute_sql(f'INSERT INTO main."{TABLE}" ("memory_id", {_NAMES}) '
                       f'SELECT "memory_id", {_NAMES} FROM main."memories"')


def restore(odb: OrchestratorDB) -> int:
    """Inside the up step to 3, after the columns are back: the kept values onto their
    memories, the detector on the rest, then the side table dropped. Returns how many
    memories the detector made restricted."""
    kept = has_table(odb)
    flagged = restrict_secrets(odb, skip_kept=kept)
    if kept:
        # A NOT NULL column takes the memory's own default should a kept value be NULL.
        sets = ", ".join(f'"{c}" = k."{c}"' if c in ("session_id", "project_id")
                         else f'"{c}" = COALESCE(k."{c}", m."{c}")' for c in KEPT_COLUMNS)
        odb.db.execute_sql(f'UPDATE main."memories" AS m SET {sets} '
                           f'FROM main."{TABLE}" AS k WHERE k."memory_id" = m."memory_id"')
        odb.db.execute_sql(f'DROP TABLE main."{TABLE}"')
    return flagged


def restrict_secrets(odb: OrchestratorDB, *, skip_kept: bool) -> int:
    """Mark restricted every memory (without kept governance when ``skip_kept``) whose
    content or summary the orchestrator's secret detector flags, as a write would;
    only ever raises sensitivity. Returns how many it marked."""
    rules = detector_rules(odb.memory)
    if not rules:
        return 0
    where = (f' WHERE "memory_id" NOT IN (SELECT "memory_id" FROM main."{TABLE}")'
             if skip_kept else "")
    rows = odb.db.execute_sql(f'SELECT "id", "content", "summary" FROM main."memories"{where}')
    found = [(row_id,) for row_id, content, summary in rows.fetchall()
             if find_secrets(f"{content}\n{summary or ''}", rules)]
    if found:
        odb.db.cursor().executemany(
            "UPDATE main.\"memories\" SET \"sensitivity\" = 'restricted' WHERE \"id\" = ?",
            found)
    return len(found)


def holds_secret(rules: Sequence[str]) -> Callable[[str | None, str | None], int]:
    """The SQL function of a reader's view: 1 when ``rules`` find a secret in a memory's
    content or summary (as a write's detector would), else 0."""

    def check(content: str | None, summary: str | None) -> int:
        return int(bool(rules) and bool(find_secrets(f"{content or ''}\n{summary or ''}",
                                                     rules)))

    return check


def copy_for_reader(conn: sqlite3.Connection, rules: Sequence[str] = SECRET_RULES) -> None:
    """On a connection to a file below schema 3: the TEMP copy of the side table (empty
    when the file has none) and the detector's SQL function, which the legacy view
    reads."""
    conn.create_function(SECRET_FUNCTION, 2, holds_secret(tuple(rules)), deterministic=True)
    conn.execute(f'DROP TABLE IF EXISTS temp."{READER_COPY}"')
    conn.execute(_DDL.format(where="temp.", table=READER_COPY))
    if has_table(conn):
        conn.execute(f'INSERT INTO temp."{READER_COPY}" ("memory_id", {_NAMES}) '
                     f'SELECT "memory_id", {_NAMES} FROM main."{TABLE}"')


def what_would_be_lost(odb: OrchestratorDB) -> str | None:
    """What a file below schema 3 cannot govern: the memories more sensitive than
    internal and those not global, counted; None when there are none."""
    restricted, confidential, scoped = odb.db.execute_sql(
        "SELECT count(*) FILTER (WHERE sensitivity = 'restricted'), "
        "count(*) FILTER (WHERE sensitivity = 'confidential'), "
        "count(*) FILTER (WHERE scope != 'global') FROM main.memories").fetchone()
    if not (restricted or confidential or scoped):
        return None
    return (f"schema 2 and below have no governance: {restricted} restricted and "
            f"{confidential} confidential memories would be served to every caller of that "
            f"release, and {scoped} session or project memories to every session")
