"""Peewee tables of one orchestrator's memory.db, and the DDL Peewee cannot express.

The model classes are declared once and bound to an orchestrator's database per
thread (``ThreadSafeDatabaseMetadata`` + ``bind_ctx``), so two threads serving two
orchestrators never share a binding. Unbound, a query fails: nothing can fall through
to a default database.

``memory_fts`` is an FTS5 external-content table over ``memories(content, summary)``,
kept in sync by triggers inside the same transaction as the row it indexes.
"""

from __future__ import annotations

import secrets
from typing import Any

from peewee import (
    SQL,
    AutoField,
    BlobField,
    CharField,
    CompositeKey,
    Database,
    FloatField,
    ForeignKeyField,
    IntegerField,
    Model,
    TextField,
)
from playhouse.shortcuts import ThreadSafeDatabaseMetadata

from orchmem.models.storage.schema.logtables import EPISODE_FTS_DDL, LOG_TABLES

#: In meta. A file with a newer version is refused at open (integrity.py); an older one
#: is brought up to this version by the numbered steps of migrations.py when a writer
#: opens it. A DDL change here needs a new step there.
SCHEMA_VERSION = 7

#: Porter stemming over unicode61 with diacritics folded: "café" matches "cafe",
#: "running" matches "run".
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"


class _Table(Model):
    class Meta:
        model_metadata_class = ThreadSafeDatabaseMetadata
        legacy_table_names = False


class MemoryRow(_Table):
    id = AutoField()  # the rowid memory_fts points at
    memory_id = CharField(unique=True)
    type = CharField()
    importance = IntegerField()
    content = TextField()
    summary = TextField()
    confidence = FloatField()
    status = CharField(default="active")
    source_type = CharField()
    source_path = TextField(null=True)
    conversation_id = CharField(null=True)
    workflow_run_id = CharField(null=True)
    step_id = CharField(null=True)
    captured_by = CharField()
    fingerprint = CharField()
    #: The exclusive slot this memory fills ("identity:name", "fact:deadline", "prefer"),
    #: and the value it gives it; see models/writeback/extraction.py.
    subject = CharField(null=True)
    value = TextField(null=True)
    #: 1 when the user said it in their own words (not hedged, not inferred).
    stated = IntegerField(default=0)
    reinforcements = IntegerField(default=0)
    forgotten = IntegerField(default=0)
    created_at = CharField()
    updated_at = CharField()
    # -- governance (schema 3, steps_governance.py): the DEFAULTs are in the DDL so that
    # ALTER TABLE ADD COLUMN gives a migrated file the same text as a new one.
    tier = CharField(default="semantic", constraints=[SQL("DEFAULT 'semantic'")])
    scope = CharField(default="global", constraints=[SQL("DEFAULT 'global'")])
    session_id = CharField(null=True)
    project_id = CharField(null=True)
    sensitivity = CharField(default="internal", constraints=[SQL("DEFAULT 'internal'")])
    tags = TextField(default="[]", constraints=[SQL("DEFAULT '[]'")])  # JSON list
    metadata = TextField(default="{}", constraints=[SQL("DEFAULT '{}'")])  # JSON object
    #: Schema 4 (steps_time.py): when it became true (NULL: since created_at), when it
    #: stopped (NULL: still true), and the dated phrases of its content (JSON list).
    valid_from = CharField(null=True)
    valid_to = CharField(null=True)
    time_refs = TextField(null=True)

    class Meta:
        table_name = "memories"
        indexes = (
            (("type", "fingerprint"), False),
            (("type", "subject"), False),
            # The bulletin reads the best few of each type: these make that a few index
            # steps instead of a sort of every memory of the type (11 ms -> 0.1 ms at 10k).
            (("status", "type", "importance", "created_at"), False),
            (("status", "type", "created_at"), False),
            (("status", "confidence"), False),
        )


class MemorySourceRow(_Table):
    id = AutoField()
    memory = ForeignKeyField(MemoryRow, field="memory_id", column_name="memory_id",
                             on_delete="CASCADE", backref="sources")
    source_type = CharField()
    source_path = TextField(null=True)
    conversation_id = CharField(null=True)
    workflow_run_id = CharField(null=True)
    step_id = CharField(null=True)
    captured_by = CharField()
    task_key = CharField(null=True)
    captured_at = CharField()

    class Meta:
        table_name = "memory_sources"


class MemoryEdgeRow(_Table):
    edge_id = CharField(primary_key=True)
    from_memory = ForeignKeyField(MemoryRow, field="memory_id", column_name="from_memory_id",
                                  on_delete="CASCADE", backref="edges_out")
    to_memory = ForeignKeyField(MemoryRow, field="memory_id", column_name="to_memory_id",
                                on_delete="CASCADE", backref="edges_in")
    edge_type = CharField()
    weight = FloatField()
    reason = TextField(null=True)
    created_at = CharField()

    class Meta:
        table_name = "memory_edges"
        indexes = (
            (("from_memory", "to_memory", "edge_type"), True),
            (("to_memory",), False),
        )


class MemoryEmbeddingRow(_Table):
    memory = ForeignKeyField(MemoryRow, field="memory_id", column_name="memory_id",
                             primary_key=True, on_delete="CASCADE")
    embedder = CharField()
    dim = IntegerField()
    vector = BlobField()
    #: Change sequence: readers load only rows with a higher seq than they hold.
    seq = IntegerField(index=True)
    updated_at = CharField()

    class Meta:
        table_name = "memory_embeddings"


class MemoryEventRow(_Table):
    """Append-only audit of every change (op, ids, before/after, reason, actor, key)."""

    id = AutoField()
    op = CharField()
    memory_ids = TextField()  # JSON list
    before = TextField(null=True)  # JSON
    after = TextField(null=True)  # JSON
    reason = TextField(null=True)
    actor = CharField()
    idempotency_key = CharField(null=True)
    at = CharField()

    class Meta:
        table_name = "memory_events"


class MemoryEventIdRow(_Table):
    """One (memory id, event id) pair per id in ``memory_events.memory_ids``: the index
    the audit lookups of one memory search (schema 2), filled with the event row."""

    memory_id = CharField()
    event = ForeignKeyField(MemoryEventRow, column_name="event_id", on_delete="CASCADE")

    class Meta:
        table_name = "memory_event_ids"
        primary_key = CompositeKey("memory_id", "event")
        without_rowid = True


class TaskReceiptRow(_Table):
    """Idempotency key → outcome, committed with the data it describes."""

    key = CharField(primary_key=True)
    task = CharField()
    status = CharField()  # started | done | rejected | dead
    result = TextField(null=True)  # JSON
    deliveries = IntegerField(default=0)
    first_seen_at = CharField()
    updated_at = CharField(index=True)

    class Meta:
        table_name = "task_receipts"


class IngestManifestRow(_Table):
    id = AutoField()
    file_name = TextField()
    sha256 = CharField(index=True)
    size = IntegerField()
    outcome = CharField()  # ingested | rejected | duplicate
    memory_ids = TextField()  # JSON list
    reason = CharField(null=True)
    detail = TextField(null=True)
    #: 1 once the file left ingest/; a committed row with 0 is a move still to finish.
    moved = IntegerField(default=0)
    at = CharField()

    class Meta:
        table_name = "ingest_manifest"


class DeadLetterRow(_Table):
    """A task that could not finish after ``max_deliveries``: kept for inspection and retry."""

    key = CharField(primary_key=True)
    task = CharField()
    payload = TextField()  # JSON kwargs of the task
    deliveries = IntegerField()
    error = TextField(null=True)
    at = CharField()

    class Meta:
        table_name = "dead_letters"


class MetaRow(_Table):
    key = CharField(primary_key=True)
    value = TextField()

    class Meta:
        table_name = "meta"


class MemoryTopicRow(_Table):
    """The topic reflection put a memory in (schema 6; models/reflection/topics.py). A table of its
    own, not a column of ``memories``: a reader holding a file of an earlier schema
    (readers never migrate) still selects every column of ``memories``."""

    memory = ForeignKeyField(MemoryRow, field="memory_id", column_name="memory_id",
                             primary_key=True, on_delete="CASCADE")
    topic = CharField(index=True)

    class Meta:
        table_name = "memory_topics"


class InsightRow(_Table):
    """Something reflection wants a person to see (schema 6): an unresolved conflict
    (``kind`` conflict, ``ref`` its Contradicts edge) or a proposal waiting for review
    (evolves_pending, ``ref`` the proposal)."""

    insight_id = CharField(primary_key=True)
    kind = CharField()  # conflict | evolves_pending
    status = CharField(default="open")  # open | dismissed
    memory_ids = TextField()  # JSON list: [newer, older]
    ref = CharField(null=True)
    reason = TextField(null=True)
    created_at = CharField()
    updated_at = CharField()

    class Meta:
        table_name = "insights"
        indexes = ((("status", "kind", "created_at"), False),)


class ProposalRow(_Table):
    """A relation newer -> older that reflection proposed (schema 6;
    models/reflection/evolves.py)."""

    proposal_id = CharField(primary_key=True)
    relation = CharField()  # replaces | challenges | refines
    newer_id = CharField()
    older_id = CharField()
    topic = CharField(null=True)
    reason = TextField()
    confidence = FloatField()
    #: The pair's statements; a rejected one is kept so it is never proposed again.
    fingerprint = CharField(unique=True)
    status = CharField(default="pending")  # pending | accepted | rejected
    decided_by = CharField(null=True)
    decided_reason = TextField(null=True)
    created_at = CharField()
    decided_at = CharField(null=True)

    class Meta:
        table_name = "proposals"
        indexes = ((("status", "created_at"), False),)


class CrystalRow(_Table):
    """The crystal of one topic (schema 6; models/reflection/crystals.py): its memory and the
    digest of the units it was compiled from."""

    topic = CharField(primary_key=True)
    memory_id = CharField(unique=True)
    units_digest = CharField()
    units = IntegerField()
    built_at = CharField()

    class Meta:
        table_name = "crystals"


TABLES: tuple[type[Model], ...] = (
    MemoryRow,
    MemorySourceRow,
    MemoryEdgeRow,
    MemoryEmbeddingRow,
    MemoryEventRow,
    MemoryEventIdRow,
    TaskReceiptRow,
    IngestManifestRow,
    DeadLetterRow,
    MetaRow,
    *LOG_TABLES,
    MemoryTopicRow,
    InsightRow,
    ProposalRow,
    CrystalRow,
)

#: The tables of memory.db a hard forget leaves alone, with why: ``memories`` is the
#: record itself (its row is emptied: storage/memories/forget.py); the others hold no words of a
#: memory. Every other table is derived from memories and has its entry in the hard
#: forget's registry (models/governance/derived.py; tests/unit/governance/test_derived.py
#: checks both).
NOT_DERIVED_TABLES: dict[str, str] = {
    "memories": "the record: its row is emptied",
    "meta": "counters and settings",
    "memory_event_ids": "memoryId -> event id",
    "task_receipts": "idempotency keys and results of ids and counts",
    "ingest_manifest": "file names, hashes and memoryIds of ingested files",
    "log_runs": "run names, outcome labels, counters (labels are kept: "
                "docs/guarantees.md#what-a-hard-forget-erases)",
}

FTS_DDL = (
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
        content, summary, content='memories', content_rowid='id',
        tokenize='{FTS_TOKENIZER}')""",
    """CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memory_fts(rowid, content, summary) VALUES (new.id, new.content, new.summary);
    END""",
    """CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, content, summary)
        VALUES ('delete', old.id, old.content, old.summary);
    END""",
    """CREATE TRIGGER IF NOT EXISTS memories_fts_update AFTER UPDATE OF content, summary
    ON memories BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, content, summary)
        VALUES ('delete', old.id, old.content, old.summary);
        INSERT INTO memory_fts(rowid, content, summary) VALUES (new.id, new.content, new.summary);
    END""",
)

#: Schema 7: ``meta.rows_seq`` goes up with every change of the rows recall caches
#: (row_cache.py), in the changing transaction.
_BUMP = "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'rows_seq'"
ROWS_SEQ_DDL = tuple(
    f"CREATE TRIGGER IF NOT EXISTS {table}_rows_seq_{event.lower()} AFTER {event} ON {table} "
    f"BEGIN {_BUMP}; END"
    for table in ("memories", "memory_edges", "memory_sources")
    for event in ("INSERT", "UPDATE", "DELETE"))
ROWS_SEQ_TRIGGERS = tuple(f"{table}_rows_seq_{event}"
                          for table in ("memories", "memory_edges", "memory_sources")
                          for event in ("insert", "update", "delete"))


def rows_seq_start() -> str:
    """The counter's first value: random, so that a file migrated down and up again
    never repeats a value a process may still hold a cache for."""
    return str(secrets.randbits(48))


#: meta keys
META_SCHEMA_VERSION = "schema_version"
META_ORCHESTRATOR_ID = "orchestrator_id"
META_EMBEDDING_SEQ = "embedding_seq"
META_EMBEDDING_DELETES = "embedding_deletes"
META_EVENT_WATERMARK = "event_watermark"
META_LAST_MIGRATED_AT = "last_migrated_at"
#: The change counter of the rows recall caches (row_cache.py, schema 7).
META_ROWS_SEQ = "rows_seq"


def create_schema(db: Database, orchestrator_id: str) -> None:
    """Create every table, index, FTS table and trigger; record version and owner.

    Call inside a write transaction on a new file.
    """
    with db.bind_ctx(TABLES):
        db.create_tables(TABLES, safe=True)
        for statement in (*FTS_DDL, *EPISODE_FTS_DDL, *ROWS_SEQ_DDL):
            db.execute_sql(statement)
        for key, value in (
            (META_SCHEMA_VERSION, str(SCHEMA_VERSION)),
            (META_ORCHESTRATOR_ID, orchestrator_id),
            (META_EMBEDDING_SEQ, "0"),
            (META_EMBEDDING_DELETES, "0"),
            (META_ROWS_SEQ, rows_seq_start()),
        ):
            MetaRow.insert(key=key, value=value).on_conflict_ignore().execute()


def live(alias: str = "") -> str:
    """The one definition of a live memory, as SQL: not hard-forgotten.

    A forgotten memory's row stays (its id anchors the audit tombstone) but holds no
    text; no read may return it. ``alias`` is the table's alias in the query ("m").
    Status (active, superseded, retracted) is a separate filter, chosen per read.
    """
    column = f"{alias}.forgotten" if alias else "forgotten"
    return f"{column} = 0"


def live_rows() -> Any:
    """:func:`live` as a Peewee expression over ``MemoryRow``."""
    return MemoryRow.forgotten == 0
