"""Attribute and span names: OpenTelemetry's semantic conventions where they name the
operation (messaging for the queue, database for SQLite, HTTP for the API), ``orchmem.*``
otherwise. Attributes hold ids, counts, lengths, durations and outcomes only: never a
memory's content, a query's text or a token (docs/operations/tracing.md#attributes)."""

from __future__ import annotations

# Messaging (the Celery queue on Redis).
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_OPERATION = "messaging.operation.type"
MESSAGING_DESTINATION = "messaging.destination.name"
MESSAGING_MESSAGE_ID = "messaging.message.id"
MESSAGING_BATCH_COUNT = "messaging.batch.message_count"
#: The broker as the messaging conventions name it (Redis lists, through Celery).
MESSAGING_SYSTEM_VALUE = "redis"

# Database (SQLite, one file per orchestrator).
DB_SYSTEM = "db.system.name"
DB_OPERATION = "db.operation.name"
DB_SYSTEM_VALUE = "sqlite"

# HTTP and MCP.
HTTP_METHOD = "http.request.method"
HTTP_ROUTE = "http.route"
HTTP_STATUS = "http.response.status_code"
MCP_TOOL = "orchmem.mcp.tool"

# orchmem's own.
ORCHESTRATOR = "orchmem.orchestrator_id"
TASK = "orchmem.task"
KEY = "orchmem.idempotency_key"
OUTCOME = "orchmem.outcome"
COUNT = "orchmem.count"
QUERY_CHARS = "orchmem.query.chars"
MODE = "orchmem.recall.mode"
LIMIT = "orchmem.recall.limit"
HITS = "orchmem.recall.hits"
TEXT_HITS = "orchmem.recall.text_hits"
VECTOR_HITS = "orchmem.recall.vector_hits"
VECTOR_AVAILABLE = "orchmem.recall.vector_available"
PLAN = "orchmem.recall.plan."
BATCH_SIZE = "orchmem.batch.size"
QUERY_TEXT = "orchmem.recall.query"
CONTEXT_PURPOSE = "orchmem.context.purpose"
BUDGET_UNIT = "orchmem.context.budget_unit"
BUDGET = "orchmem.context.budget"
USED = "orchmem.context.used"
PROJECTION = "orchmem.projection"
RUN_ID = "orchmem.run_id"
CHECKPOINT_ID = "orchmem.checkpoint_id"
SCHEMA_VERSION = "orchmem.checkpoint.schema_version"
PARENT_CHECKPOINT = "orchmem.checkpoint.has_parent"
FILE = "orchmem.file.name"
BYTES = "orchmem.bytes"
SECONDS = "orchmem.seconds."

# Span names (docs/operations/tracing.md#span-names lists the same). Those of a task,
# an HTTP route or an MCP tool are made from templates: ``<task>`` is a Celery task
# name (orchmem.writeback), ``<tool>`` an MCP tool, ``<method> <route>`` a request.
SPAN_PUBLISH = "publish <task>"
SPAN_PROCESS = "process <task>"
SPAN_BATCH = "process <task> batch"
SPAN_HTTP = "<method> <route>"
SPAN_MCP = "tools/call <tool>"
SPAN_OUTBOX = "orchmem.outbox.record"
SPAN_TRANSACTION = "sqlite transaction"
SPAN_RECALL = "orchmem.recall"
SPAN_RECALL_EMBED = "orchmem.recall.embed"
SPAN_RECALL_FULL_TEXT = "orchmem.recall.full_text"
SPAN_RECALL_VECTOR = "orchmem.recall.vector_search"
SPAN_RECALL_FUSION = "orchmem.recall.fusion"
SPAN_RECALL_BUNDLE = "orchmem.recall.bundle"
SPAN_BULLETIN = "orchmem.bulletin.build"
SPAN_CONTEXT = "orchmem.context.build"
SPAN_INGEST_SCAN = "orchmem.ingest.scan"
SPAN_INGEST_FILE = "orchmem.ingest.file"
SPAN_REFLECT = "orchmem.reflection.run"
SPAN_LOG_APPEND = "orchmem.log.append"
SPAN_CHECKPOINT_CREATE = "orchmem.checkpoint.create"
SPAN_CHECKPOINT_RESTORE = "orchmem.checkpoint.restore"


def task_span(template: str, task: str) -> str:
    """A span name made from a ``<task>`` template (:data:`SPAN_PROCESS`)."""
    return template.replace("<task>", task)


# Metric names (docs/operations/tracing.md#metrics lists the same; on a worker's
# Prometheus endpoint with dots as underscores: worker/runtime/metrics.py).
M_RECALL_DURATION = "orchmem.recall.duration"
M_RECALL_HITS = "orchmem.recall.hits"
M_TASK_OUTCOMES = "orchmem.task.outcomes"
M_MEMORIES_CREATED = "orchmem.memories.created"
M_TASK_DURATION = "messaging.process.duration"
M_QUEUE_WAIT = "orchmem.queue.wait"
M_BATCH_SIZE = "orchmem.batch.size"
M_CONTEXT_BUDGET = "orchmem.context.budget_use"
M_PROJECTION_LAG = "orchmem.projection.lag"
M_MIGRATIONS = "orchmem.schema.migrations"
M_REFLECTIONS = "orchmem.reflection.runs"
M_REEMBEDDED = "orchmem.reembed.memories"

# Counts of the execution log's append and of reflection.
APPENDED = "orchmem.log.appended"
REPLAYED = "orchmem.log.replayed"
CHECKPOINTS = "orchmem.log.checkpoints"
EPISODES = "orchmem.log.episodes"
TRUNCATED = "orchmem.truncated"
CHARS = "orchmem.chars"
TOKENS_BUDGET = "orchmem.context.tokens_budget"
TOKENS_USED = "orchmem.context.tokens_used"
REASON = "orchmem.reason"
REMAINING = "orchmem.remaining"
#: Files of an ingest scan by outcome: ``orchmem.ingest.ingested`` and so on.
INGEST = "orchmem.ingest."
#: A reflection run's counts: ``orchmem.reflection.proposals`` and so on.
REFLECTION = "orchmem.reflection."
