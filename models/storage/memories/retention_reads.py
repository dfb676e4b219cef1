"""What retention looks at: each live memory's type, tier, scope, status and the time it
is measured from (for a session-scoped memory, its session's last activity)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.events import set_meta

# A session's last activity: the last time anything was said in it, the newest
# capture (first statement or restatement) of any of its memories.
_ROWS = """
WITH last AS (SELECT m.session_id, max(s.captured_at) AS at
              FROM memories m JOIN memory_sources s ON s.memory_id = m.memory_id
              WHERE m.session_id IS NOT NULL GROUP BY m.session_id)
SELECT m.memory_id, m.type, m.tier, m.scope, m.status,
       CASE WHEN m.scope = 'session' THEN coalesce(last.at, m.created_at)
            ELSE m.created_at END
FROM memories m LEFT JOIN last ON last.session_id = m.session_id
WHERE m.forgotten = 0 ORDER BY m.created_at, m.memory_id"""


@dataclass(frozen=True, slots=True)
class Kept:
    memory_id: str
    type: str
    tier: str
    scope: str
    status: str
    #: ISO 8601 UTC: when its retention clock started.
    since: str


def kept(odb: OrchestratorDB) -> list[Kept]:
    """Every live memory, oldest first, in one snapshot."""
    with odb.read():
        return [Kept(*row) for row in odb.sql(_ROWS)]


#: meta key: the counts of the last retention run (JSON), for ``orchmem stats``.
META_RETENTION_LAST = "retention_last"


def record_run(odb: OrchestratorDB, summary: dict[str, object]) -> None:
    """Keep ``summary`` (at, count, soft, hard, byRule) as the last run's, in meta."""
    with odb.write():
        set_meta(META_RETENTION_LAST, json.dumps(summary, sort_keys=True))


def last_run(odb: OrchestratorDB) -> dict[str, object] | None:
    """The last retention run's counts, or None (inside or outside a read)."""
    rows = odb.sql("SELECT value FROM meta WHERE key = ?", (META_RETENTION_LAST,))
    return json.loads(rows[0][0]) if rows else None
