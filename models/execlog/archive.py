"""Retention of the execution log (seed 003's "log bloat"): old events move to JSONL
archive files, audit-critical ones stay unless a policy says otherwise.

``memory.log.archive_after_days`` (None: never, the default) is the TTL, per
orchestrator like every ``memory.*`` setting; the daily retention job (tasks/retention.py)
archives the events recorded before it, and ``orchmem retention --archive-log-before T``
archives those recorded before T now. Only events of runs whose episode is made are
archived, and audit-critical events (tool calls and results, checkpoints, replay-mode
and compensation events, every event of a replay: models/storage/execlog/archive.py)
stay in the log unless ``memory.log.archive_audit_critical`` is true, the explicit
policy.

Each batch is written first, to ``memory/log-archive/log-<firstSeq>-<lastSeq>.jsonl``
(0600, replaced atomically, fsynced): a header line (the range, the count, the policy),
then one event a line, as ``orchmem log`` shows it; then its rows are deleted in one
transaction. A crash between the two leaves the events in the log and in a file; the
next job writes them again (a file of the same range is replaced). The runs stay
listed (``log_runs``), and the archives are listed by ``orchmem log --archived``. A hard
forget reaches the archive files (models/governance/derived.py): the events of the runs
its memory cites or its episodes name, and any archived event quoting all of its
content words, lose their text and data, marked ``redacted``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from orchmem.config import MemoryValidationError
from orchmem.models.core.shapes import check_timestamp, format_ts, parse_ts
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.execlog import archive as store
from orchmem.models.workspace.atomic import write_atomically
from orchmem.models.workspace.private import private_dir

FOLDER = "log-archive"
#: Events per archive file, and files per job (the rest waits for the next job).
BATCH = 5000
MAX_BATCHES = 20
ARCHIVE_VERSION = 1


def folder_of(odb: OrchestratorDB) -> Path:
    return odb.workspace.memory_dir / FOLDER


def check_cut(value: object, where: str = "archiveLogBefore") -> datetime | None:
    """An operator's archive cut (ISO 8601 with a zone), or None; MemoryValidationError
    naming ``where`` otherwise."""
    if value is None:
        return None
    try:
        checked = check_timestamp(value)
        return checked if isinstance(checked, datetime) else parse_ts(checked)
    except ValueError as exc:
        message = f"{where}: {exc}"
        raise MemoryValidationError(message, [{"path": where, "message": str(exc)}]) from None


def cut_of(odb: OrchestratorDB, now: datetime, before: datetime | None) -> str | None:
    """The recorded time before which events are archived: ``before`` when an operator
    gives one, else ``now`` minus ``memory.log.archive_after_days``; None: no archive."""
    if before is not None:
        return format_ts(min(before, now))
    days = odb.memory.log.archive_after_days
    return None if days is None else format_ts(now - timedelta(days=days))


def archive_log(odb: OrchestratorDB, now: datetime, before: datetime | None = None, *,
                dry_run: bool = False) -> dict[str, Any]:
    """Archive the eligible events (see the module doc). Returns ``{"archived", "files",
    "keptAuditCritical", "before", "auditCritical"}``."""
    cut = cut_of(odb, now, before)
    critical = odb.memory.log.archive_audit_critical
    report: dict[str, Any] = {"archived": 0, "files": [], "before": cut,
                              "auditCritical": critical, "keptAuditCritical": 0}
    if cut is None:
        return report
    for _ in range(MAX_BATCHES):
        events = store.archivable(odb, cut, audit_critical=critical, limit=BATCH)
        if not events or dry_run:
            report["archived"] += len(events)
            break
        path = _write(odb, events, now, cut, critical)
        with odb.write():
            report["archived"] += store.delete_events(odb, [int(e["seq"]) for e in events])
        report["files"].append(path.name)
    if not critical:
        report["keptAuditCritical"] = store.kept_critical(odb, cut)
    return report


def _write(odb: OrchestratorDB, events: list[dict[str, Any]], now: datetime, cut: str,
           critical: bool) -> Path:
    first, last = int(events[0]["seq"]), int(events[-1]["seq"])
    header = {"archive": ARCHIVE_VERSION, "orchestratorId": odb.orchestrator_id,
              "firstSeq": first, "lastSeq": last, "events": len(events),
              "firstAt": events[0].get("recordedAt"), "lastAt": events[-1].get("recordedAt"),
              "archivedAt": format_ts(now),
              "policy": {"before": cut, "auditCritical": critical}}
    path = private_dir(folder_of(odb)) / f"log-{first:012d}-{last:012d}.jsonl"
    write_atomically(path, _jsonl([header, *events]))
    return path


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def archives(odb: OrchestratorDB) -> list[dict[str, Any]]:
    """The archive files' headers (range, count, times, policy) plus ``file``, oldest
    first."""
    folder = folder_of(odb)
    found: list[dict[str, Any]] = []
    for path in sorted(folder.glob("log-*.jsonl")) if folder.is_dir() else []:
        try:
            with path.open(encoding="utf-8") as fh:
                header = json.loads(fh.readline())
        except (OSError, ValueError):
            header = {"damaged": True}
        found.append({"file": path.name, **header})
    return found


def redact_archives(odb: OrchestratorDB, runs: set[str], words: set[str],
                    reason: str) -> int:
    """Erase the text and data of archived events of ``runs``, and of those whose text
    and data hold every one of ``words`` (casefolded); returns how many."""
    redacted = 0
    folder = folder_of(odb)
    for path in sorted(folder.glob("log-*.jsonl")) if folder.is_dir() else []:
        lines = path.read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        changed = 0
        for row in rows[1:]:
            if ("text" in row or "data" in row) and _hit(row, runs, words):
                row.pop("text", None)
                row.pop("data", None)
                row["redacted"] = reason
                changed += 1
        if changed:
            write_atomically(path, _jsonl(rows))
            redacted += changed
    return redacted


def _hit(row: dict[str, Any], runs: set[str], words: set[str]) -> bool:
    if row.get("runId") in runs:
        return True
    if not words:
        return False
    said = f"{row.get('text', '')} {json.dumps(row.get('data', ''), ensure_ascii=False)}"
    return all(word in said.casefold() for word in words)
