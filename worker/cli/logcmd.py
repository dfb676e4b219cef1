"""``orchmem log``: the execution log, chronologically, a page at a time, its tail, or
one run as a tree of spans; ``orchmem checkpoint``: show (restore) and diff
checkpoints."""

from __future__ import annotations

import json
from typing import Any

import click

from orchmem.config import MemoryValidationError
from orchmem.models.core.shapes import check_memory_id, format_ts, parse_ts
from orchmem.models.execlog import checkpoints
from orchmem.models.execlog.archive import archives
from orchmem.models.execlog.rules import check_run_id
from orchmem.models.storage.execlog.entries import (
    event_by_id,
    events_of_memory,
    read_log,
    tail_log,
)
from orchmem.worker.cli.common import (
    Cli,
    emit,
    json_option,
    missing_ok_option,
    orch_option,
    pass_cli,
)
from orchmem.worker.cli.memory import open_existing


@click.command("log")
@orch_option
@click.option("--run", "run_id", metavar="R", help="Only this run's events.")
@click.option("--since", metavar="T", help="Events recorded at or after T (ISO 8601).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="Events per page.")
@click.option("--cursor", type=click.IntRange(0), default=0,
              help="Continue after this seq (the previous page's nextCursor).")
@click.option("--memory", "memory_id", metavar="M",
              help="The events of the steps that produced memory M (its provenance).")
@click.option("--tail", type=click.IntRange(1, 10_000), default=None, metavar="N",
              help="Only the last N events (of --run when given).")
@click.option("--tree", is_flag=True,
              help="With --run: the run's events as a tree of spans (parent/child).")
@click.option("--archived", is_flag=True,
              help="List the archived ranges of the log (memory/log-archive/).")
@missing_ok_option
@json_option
@pass_cli
def log(cli: Cli, orchestrator_id: str, run_id: str | None, since: str | None, limit: int,
        cursor: int, memory_id: str | None, tail: int | None, tree: bool, archived: bool,
        missing_ok: bool, as_json: bool) -> None:
    """Replay the execution log of an orchestrator in the order it was appended."""
    # A bad value, or another orchestrator's run or memory, exits with its error
    # (the group reports orchmem's errors as one line).
    if run_id is not None:
        check_run_id(run_id, orchestrator_id, "--run")
    if memory_id is not None:
        check_memory_id(memory_id, orchestrator_id, "--memory")
    if tree and run_id is None:
        message = "--tree: needs --run R (the run whose spans to show)"
        raise MemoryValidationError(message, [{"path": "tree", "message": message}])
    since_ts = _since(since)
    odb = open_existing(cli.settings, orchestrator_id, as_json, missing_ok)
    if odb is None:
        return
    if archived:
        found = archives(odb)
        emit({"orchestratorId": orchestrator_id, "archives": found}, as_json,
             "\n".join(f"{a['file']}: seq {a.get('firstSeq')}-{a.get('lastSeq')}, "
                       f"{a.get('events')} events, {a.get('firstAt')} .. {a.get('lastAt')}"
                       for a in found) or "-- no archived ranges")
        return
    if tree and run_id is not None:
        _tree(orchestrator_id, run_id, read_log(odb, run_id=run_id, limit=10_000)[0],
              as_json)
        return
    if tail is not None:
        events, next_cursor = tail_log(odb, tail, run_id), None
    elif memory_id is not None:
        events, next_cursor = events_of_memory(odb, memory_id), None
    else:
        events, next_cursor = read_log(odb, run_id=run_id, since=since_ts, after=cursor,
                                       limit=limit)
    data = {"orchestratorId": orchestrator_id, "events": events, "nextCursor": next_cursor}
    emit(data, as_json, "\n".join([*(_line(e) for e in events),
                                   f"-- next page: --cursor {next_cursor}" if next_cursor
                                   else f"-- {len(events)} events, end of log"]))


def _tree(orchestrator_id: str, run_id: str, events: list[dict[str, Any]],
          as_json: bool) -> None:
    roots = checkpoints.tree(events)
    lines: list[str] = []

    def walk(nodes: list[dict[str, Any]], depth: int) -> None:
        for node in nodes:
            lines.append("  " * depth + _line({k: v for k, v in node.items()
                                               if k != "children"}))
            walk(node["children"], depth + 1)

    walk(roots, 0)
    emit({"orchestratorId": orchestrator_id, "runId": run_id, "tree": roots}, as_json,
         "\n".join(lines) or f"-- no events of {run_id}")


@click.group("checkpoint")
def checkpoint() -> None:
    """Checkpoints of the execution log: show one as restore sees it, diff two."""


@checkpoint.command("show")
@orch_option
@click.argument("checkpoint_id")
@json_option
@pass_cli
def show(cli: Cli, orchestrator_id: str, checkpoint_id: str, as_json: bool) -> None:
    """Show CHECKPOINT_ID's metadata, checked as a restore checks it (schema version)."""
    odb = open_existing(cli.settings, orchestrator_id, as_json)
    if odb is None:
        return
    found = checkpoints.find(lambda e: event_by_id(odb, e), checkpoint_id, orchestrator_id,
                             "CHECKPOINT_ID")
    checked = checkpoints.check_restorable(found, odb.memory.log, "CHECKPOINT_ID")
    emit(checked, as_json, "\n".join(f"{k}: {v}" for k, v in checked.items()))


@checkpoint.command("diff")
@orch_option
@click.argument("a")
@click.argument("b")
@json_option
@pass_cli
def diff(cli: Cli, orchestrator_id: str, a: str, b: str, as_json: bool) -> None:
    """Compare the metadata of checkpoints A and B (and find their common ancestor)."""
    odb = open_existing(cli.settings, orchestrator_id, as_json)
    if odb is None:
        return
    read = lambda e: event_by_id(odb, e)  # noqa: E731
    result = checkpoints.diff(read, checkpoints.find(read, a, orchestrator_id, "A"),
                              checkpoints.find(read, b, orchestrator_id, "B"))
    emit(result, as_json, "\n".join([*(f"{k}: {v[0]} -> {v[1]}"
                                       for k, v in result["changed"].items()),
                                     f"common ancestor: {result['commonAncestor']}"]))


def _since(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        parsed = parse_ts(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        message = f"--since: {value[:40]!r} is not an ISO 8601 time with a zone"
        raise MemoryValidationError(message, [{"path": "since", "message": message}])
    return format_ts(parsed)


def _line(event: dict[str, Any]) -> str:
    what = " ".join(str(event[k]) for k in ("name", "status") if k in event)
    text = event.get("text") or (f"sha256:{event['digest'][:12]}" if "digest" in event else "")
    extra = f" data={json.dumps(event['data'], ensure_ascii=False)[:80]}" if "data" in event \
        else ""
    checkpoint = f" checkpoint={event['checkpointRef']} v{event['checkpointSchemaVersion']}" \
        if "checkpointRef" in event else ""
    return (f"{event['seq']:>8} {event['at']} {event['runId']} "
            f"{event.get('stepId', '-'):<12} {event['kind']:<11} {what} "
            f"{' '.join(text.split())[:100]}{extra}{checkpoint}"
            f"{' [replay]' if event['replay'] else ''}"
            f"{' [redacted]' if 'redacted' in event else ''}").rstrip()


COMMANDS = [log, checkpoint]
