"""Tables of the execution log and its episodes (schema 5): see models/execlog/rules.py.

``log_events`` is append-only: a row is never deleted, and only a hard forget
changes one (redaction.py: its text and data go, its id, digest and times stay, and
it is marked redacted). ``seq`` is the order of appending and the log's watermark.
``log_runs`` keeps one row per run (its replay flag, status and the seq range of its events);
``episodes`` is a projection of ended runs (models/execlog/episodes.py) with its own full-text
index, and ``episode_memories`` links an episode to the memories its run produced.

Every artifact carries its schema version (``schema_version``); checkpoints carry the
schema version of the state they point at (``checkpoint_schema``), and episodes the
version of the summarizer that wrote them.
"""

from __future__ import annotations

from peewee import AutoField, CharField, CompositeKey, IntegerField, Model, TextField
from playhouse.shortcuts import ThreadSafeDatabaseMetadata


class _LogTable(Model):
    class Meta:
        model_metadata_class = ThreadSafeDatabaseMetadata
        legacy_table_names = False


class LogRunRow(_LogTable):
    run_id = CharField(primary_key=True)
    name = CharField(null=True)
    conversation_id = CharField(null=True)
    #: 1 when the run replays an earlier one: its tool calls must not have side effects.
    replay = IntegerField(default=0)
    #: open | ended (its episode is missing or stale) | projected (its episode is current)
    status = CharField(default="open")
    outcome = CharField(null=True)
    started_at = CharField()
    ended_at = CharField(null=True)
    first_seq = IntegerField()
    last_seq = IntegerField()
    events = IntegerField(default=0)
    #: The last seq of this run its episode covers (0: none yet).
    projected_seq = IntegerField(default=0)
    schema_version = IntegerField()

    class Meta:
        table_name = "log_runs"
        indexes = ((("status",), False),)


class LogEventRow(_LogTable):
    seq = AutoField()
    #: Derived from the event's idempotency key: a replayed event is the same row.
    event_id = CharField(unique=True)
    idempotency_key = CharField()
    run_id = CharField()
    step_id = CharField(null=True)
    span_id = CharField(null=True)
    parent_id = CharField(null=True)
    kind = CharField()
    name = CharField(null=True)
    status = CharField(null=True)
    actor = CharField(null=True)
    digest = CharField(null=True)
    text = TextField(null=True)
    data = TextField(null=True)  # JSON
    checkpoint_ref = TextField(null=True)
    checkpoint_schema = IntegerField(null=True)
    parent_checkpoint_id = CharField(null=True)
    replay = IntegerField(default=0)
    schema_version = IntegerField()
    task_key = CharField()
    at = CharField()
    recorded_at = CharField(index=True)

    class Meta:
        table_name = "log_events"
        indexes = ((("run_id", "seq"), False),)


class EpisodeRow(_LogTable):
    id = AutoField()  # the rowid episode_fts points at
    episode_id = CharField(unique=True)
    run_id = CharField(unique=True)
    title = TextField()
    summary = TextField()
    participants = TextField()  # JSON list
    tools = TextField()  # JSON list
    outcome = CharField(null=True)
    started_at = CharField()
    ended_at = CharField(null=True)
    first_seq = IntegerField()
    last_seq = IntegerField()
    events = IntegerField()
    memories = IntegerField()
    summarizer = CharField()
    schema_version = IntegerField()
    updated_at = CharField()

    class Meta:
        table_name = "episodes"


class EpisodeMemoryRow(_LogTable):
    """An episode and a memory its run produced (a memory source naming the run)."""

    episode_id = CharField()
    memory_id = CharField(index=True)

    class Meta:
        table_name = "episode_memories"
        primary_key = CompositeKey("episode_id", "memory_id")
        without_rowid = True


LOG_TABLES: tuple[type[Model], ...] = (LogRunRow, LogEventRow, EpisodeRow, EpisodeMemoryRow)

EPISODE_FTS_DDL = (
    """CREATE VIRTUAL TABLE IF NOT EXISTS episode_fts USING fts5(
        title, summary, content='episodes', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER IF NOT EXISTS episodes_fts_insert AFTER INSERT ON episodes BEGIN
        INSERT INTO episode_fts(rowid, title, summary) VALUES (new.id, new.title, new.summary);
    END""",
    """CREATE TRIGGER IF NOT EXISTS episodes_fts_delete AFTER DELETE ON episodes BEGIN
        INSERT INTO episode_fts(episode_fts, rowid, title, summary)
        VALUES ('delete', old.id, old.title, old.summary);
    END""",
    """CREATE TRIGGER IF NOT EXISTS episodes_fts_update AFTER UPDATE OF title, summary
    ON episodes BEGIN
        INSERT INTO episode_fts(episode_fts, rowid, title, summary)
        VALUES ('delete', old.id, old.title, old.summary);
        INSERT INTO episode_fts(rowid, title, summary) VALUES (new.id, new.title, new.summary);
    END""",
)
