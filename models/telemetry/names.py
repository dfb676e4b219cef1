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
