"""Memory commands: ``write``, ``list``, ``stats``."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import click
from celery.exceptions import TimeoutError as CeleryTimeout

from orchmem.config import BrokerUnavailable, OrchmemError, Settings
from orchmem.models.core.payloads import DEFAULT_SOURCE, check_writeback
from orchmem.models.core.shapes import MemoryInput, Status
from orchmem.models.ingest.files import settle_s
from orchmem.models.recall.bundle import RecallBundle
from orchmem.models.recall.search import Mode
from orchmem.models.recall.search import recall as recall_memories
from orchmem.models.storage.db.database import Databases, OrchestratorDB, known_orchestrators
from orchmem.models.storage.db.stats import stats as memory_stats
from orchmem.models.storage.memories.rows import list_memories
from orchmem.models.storage.visibility import View, make_view
from orchmem.models.workspace.folders import Workspace
from orchmem.tasks.ingest import INGEST_SCAN
from orchmem.tasks.writeback import WRITEBACK
from orchmem.worker.cli.common import (
    EXIT_UNAVAILABLE,
    STATUSES,
    TYPE_CHOICE,
    Cli,
    emit,
    fail,
    json_option,
    missing_ok_option,
    one_line,
    orch_option,
    pass_cli,
    require_orchestrator,
)
from orchmem.worker.cli.governance_options import (
    governance_fields,
    tier_option,
    view_options,
    write_options,
)
from orchmem.worker.client.handles import found_by
from orchmem.worker.client.memory_client import MemoryClient
from orchmem.worker.client.remote import ask_reader, running_reader_serves
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.broker import broker_url
from orchmem.worker.runtime.publish import publish
from orchmem.worker.runtime.redis_clients import broker_client
from orchmem.worker.runtime.shards import all_queues, queue_for, shard_for

logger = logging.getLogger(__name__)


def open_existing(settings: Settings, orchestrator_id: str, as_json: bool,
                  missing_ok: bool = False) -> OrchestratorDB | None:
    """The orchestrator's database for reading, or None (after saying so) when it has none.

    An orchestrator unknown under the root is an error (exit 3), unless ``missing_ok``.
    """
    try:
        if not require_orchestrator(settings, orchestrator_id, missing_ok):
            emit({"orchestratorId": orchestrator_id, "memories": []}, as_json,
                 f"no orchestrator {orchestrator_id!r} under {settings.root}")
            return None
        odb = Databases(settings, readonly=True).open(orchestrator_id, create=False)
    except OrchmemError as exc:
        fail(exc, as_json)
        raise  # unreachable: fail exits
    if odb is None:
        emit({"orchestratorId": orchestrator_id, "memories": []}, as_json,
             f"orchestrator {orchestrator_id!r} has no memory yet "
             f"(no {settings.runtime_root(orchestrator_id) / 'memory' / 'memory.db'})")
    return odb


def wait_for(result: Any, timeout: float, as_json: bool) -> dict[str, Any]:
    """The task's result, or exit with a clear message on failure or timeout."""
    try:
        value = result.get(timeout=timeout, propagate=False)
    except CeleryTimeout:
        message = (f"no worker answered within {timeout:g}s. Is `orchmem up` running for this "
                   f"root? The task stays queued (id {result.id}) and runs when a worker starts.")
        click.echo(f"Error: {message}", err=True)
        if as_json:
            emit({"ok": False, "error": "timeout", "message": message, "taskId": result.id}, True)
        raise SystemExit(EXIT_UNAVAILABLE) from None
    if result.failed():
        if isinstance(value, OrchmemError):
            fail(value, as_json)
        raise click.ClickException(f"task {result.id} failed: {value!r}")
    return dict(value)


@click.command()
@orch_option
@click.option("--type", "memory_type", required=True, type=TYPE_CHOICE,
              help="Memory type.")
@click.option("--content", required=True, help="The memory, as plain text.")
@click.option("--summary", help="A short summary (default: the first sentence).")
@click.option("--importance", type=click.IntRange(0, 100), default=50, show_default=True)
@click.option("--confidence", type=click.FloatRange(0.0, 1.0),
              default=MemoryInput.model_fields["confidence"].default, show_default=True,
              help="As write_back's default when not given.")
@click.option("--idempotency-key", help="Writes with the same key happen once.")
@click.option("--timeout", type=float, help="Seconds to wait for the worker "
              "(default: worker.wait_timeout_s).")
@click.option("--no-wait", is_flag=True, help="Publish and print the task id only.")
@write_options
@json_option
@pass_cli
def write(cli: Cli, orchestrator_id: str, memory_type: str, content: str, summary: str | None,
          importance: int, confidence: float, idempotency_key: str | None,
          timeout: float | None, no_wait: bool, as_json: bool, **governance: Any) -> None:
    """Write one memory through the queue and print its memoryId."""
    settings = cli.settings
    memory: dict[str, Any] = {
        "type": memory_type, "content": content, "importance": importance,
        "confidence": confidence, "source": dict(DEFAULT_SOURCE),
        **governance_fields(**governance),
    }
    if summary:
        memory["summary"] = summary
    payload: dict[str, Any] = {"memories": [memory]}
    if idempotency_key:
        payload["idempotencyKey"] = idempotency_key
    limits = settings.memory_for(orchestrator_id).writeback
    try:
        check_writeback(payload, Workspace.for_orchestrator(settings, orchestrator_id),
                        max_memories=limits.max_memories_per_task,
                        max_content_chars=limits.max_content_chars)
        app = create_app(settings)
        key, result = publish(app, WRITEBACK, orchestrator_id, "wb", payload)
    except OrchmemError as exc:
        fail(exc, as_json)
        return
    if no_wait:
        emit({"ok": True, "taskId": result.id, "idempotencyKey": key}, as_json,
             f"published {result.id}")
        return
    value = wait_for(result, timeout or settings.worker.wait_timeout_s, as_json)
    ids = value.get("memoryIds", [])
    note = " (already written)" if value.get("duplicate") else ""
    note += " (reinforced an existing memory)" if value.get("reinforced") else ""
    emit({"memoryIds": ids, "idempotencyKey": key, "duplicate": value.get("duplicate", False),
          "reinforced": value.get("reinforced", [])}, as_json, "\n".join(ids) + note)


@click.command(name="list")
@orch_option
@click.option("--status", type=click.Choice([*STATUSES, "any"]), default="active",
              show_default=True)
@click.option("--type", "types", type=TYPE_CHOICE, multiple=True,
              help="Filter (repeatable).")
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@view_options
@tier_option
@missing_ok_option
@json_option
@pass_cli
def list_(cli: Cli, orchestrator_id: str, status: str, types: tuple[str, ...], limit: int,
          missing_ok: bool, as_json: bool, session_id: str | None, project_id: str | None,
          tags: tuple[str, ...], tiers: tuple[str, ...]) -> None:
    """List memories, newest first (reads the database directly; restricted ones left
    out; global ones and those of --session / --project)."""
    odb = open_existing(cli.settings, orchestrator_id, as_json, missing_ok)
    if odb is None:
        return
    nodes = list_memories(odb, status=None if status == "any" else Status(status),
                          types=list(types), limit=limit,
                          view=View(session_id, project_id, tags, tiers=tiers))
    header = f"{'MEMORY ID':<29} {'TYPE':<11} {'STATUS':<10} {'IMP':>3} {'CONF':>4}  CONTENT"
    lines = [f"{n.memory_id:<29} {n.type.value:<11} {n.status.value:<10} {n.importance:>3} "
             f"{n.confidence:.2f}  {one_line(n.content, 70)}" for n in nodes]
    emit({"orchestratorId": orchestrator_id, "memories": [n.dump() for n in nodes]}, as_json,
         "\n".join([header, *lines]) if lines else "no memories")


def from_reader(settings: Settings, orchestrator_id: str, query: str,
                **options: Any) -> RecallBundle | None:
    """The recall a running reader answers, or None (said on stderr) when no broker or
    no reader serves this orchestrator's shard, or it fails: the caller then recalls in
    its own process."""
    try:
        app = create_app(settings)
    except BrokerUnavailable:
        app = None
    if app is None or not running_reader_serves(app, shard_for(settings, orchestrator_id)):
        click.echo("no reader is running (`orchmem up` starts one): recalling in this "
                   "process, which loads the embedding model first", err=True)
        return None
    try:
        return ask_reader(MemoryClient(orchestrator_id, settings, app=app, remote=True),
                          query, wait_for_writes=False, **options)
    except OrchmemError as exc:
        logger.warning("recall through the reader failed (%s); recalling here", exc)
        return None


def queue_depths(settings: Settings) -> dict[str, int] | str:
    """Messages waiting per shard queue, or why they cannot be read."""
    import redis

    try:
        client = broker_client(broker_url(settings), settings, socket_timeout=2,
                               socket_connect_timeout=2)
        return {queue: int(client.llen(queue)) for queue in all_queues(settings)}
    except (OrchmemError, redis.RedisError) as exc:
        return f"unavailable ({exc})"


def _overview(settings: Settings, as_json: bool) -> None:
    databases = Databases(settings)
    rows: dict[str, Any] = {}
    for orchestrator_id in known_orchestrators(settings):
        try:
            odb = databases.open(orchestrator_id, create=False)
            rows[orchestrator_id] = memory_stats(odb) if odb else {"status": "empty"}
        except OrchmemError as exc:
            rows[orchestrator_id] = {"status": exc.code, "message": str(exc)}
    depths = queue_depths(settings)
    lines = [f"{'orchestrator':<24} {'memories':>8} {'no vector':>9} {'dead':>5}  "
             f"{'last bulletin':<27} last ingest"]
    for orchestrator_id, row in rows.items():
        if "memories" not in row:
            lines.append(f"{orchestrator_id:<24} {row['status']}")
            continue
        lines.append(f"{orchestrator_id:<24} {row['memories']:>8} "
                     f"{row['embeddingsMissing']:>9} {row['deadLetters']:>5}  "
                     f"{row['lastBulletinAt'] or '-':<27} {row['lastIngestAt'] or '-'}")
    lines.append("queues: " + (", ".join(f"{q} {n}" for q, n in depths.items())
                               if isinstance(depths, dict) else depths))
    emit({"orchestrators": rows, "queues": depths}, as_json, "\n".join(lines))


@click.command()
@click.option("--orch", "orchestrator_id", metavar="ID",
              help="One orchestrator in detail (default: an overview of all).")
@missing_ok_option
@json_option
@pass_cli
def stats(cli: Cli, orchestrator_id: str | None, missing_ok: bool, as_json: bool) -> None:
    """Counts per type and status, embeddings missing, dead letters, queue depths,
    last bulletin and last ingest."""
    if orchestrator_id is None:
        _overview(cli.settings, as_json)
        return
    odb = open_existing(cli.settings, orchestrator_id, as_json, missing_ok)
    if odb is None:
        return
    data = memory_stats(odb)
    depths = queue_depths(cli.settings)
    shard_queue = queue_for(cli.settings, orchestrator_id)
    data["queue"] = {"name": shard_queue, "depth": depths.get(shard_queue)
                     if isinstance(depths, dict) else depths}
    lines = [f"orchestrator {orchestrator_id}: {data['memories']} memories "
             f"({', '.join(f'{k} {v}' for k, v in sorted(data['byStatus'].items())) or 'none'})"]
    for memory_type, counts in sorted(data["byType"].items()):
        by_status = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        lines.append(f"  {memory_type:<12} {by_status}")
    lines.append(f"  edges {data['edges']}, events {data['events']}, embeddings missing "
                 f"{data['embeddingsMissing']}, dead letters {data['deadLetters']}")
    lines.append(f"  memory.db {data['dbBytes']} bytes, WAL {data['walBytes']} bytes, "
                 f"last change {data['lastEventAt'] or '-'}")
    lines.append(f"  last bulletin {data['lastBulletinAt'] or '-'}, last ingest "
                 f"{data['lastIngestAt'] or '-'}, queue {shard_queue}: {data['queue']['depth']}")
    mark = data["watermark"]
    lines.append(f"  log seq {mark['log']['seq']} ({mark['log']['recordedAt'] or '-'}); behind "
                 f"it: episodes {mark['episodes']['behindRuns']} runs, vectors "
                 f"{mark['vectors']['behindMemories']}, full text "
                 f"{mark['fts']['behindMemories']}, bulletin "
                 f"{mark['bulletin']['behindChanges']} changes")
    if data.get("reflection"):
        r = data["reflection"]
        proposals = ", ".join(f"{k} {v}" for k, v in sorted(r["proposals"].items())) or "-"
        lines.append(f"  topics {r['topics']}, crystals {r['crystals']}, proposals "
                     f"{proposals}, last reflection {r['lastReflectAt'] or '-'}")
    gov = data["governance"]
    lines += [f"  by {name}: " + ", ".join(f"{k} {v}" for k, v in gov[key].items())
              for name, key in (("tier", "byTier"), ("scope", "byScope"),
                                ("sensitivity", "bySensitivity"))]
    last = gov["lastRetention"]
    lines.append("  last retention: " + (f"{last['at']}: {last['count']} forgotten "
                                         f"({last['soft']} soft, {last['hard']} hard)"
                                         if last else "never"))
    if data.get("degraded"):
        lines.append(f"  DEGRADED (read-only): {data['degraded'].get('reason')}")
    emit(data, as_json, "\n".join(lines))


@click.command()
@orch_option
@click.argument("query")
@click.option("--top-n", type=click.IntRange(1, 1000), help="How many memories (default: "
              "memory.retrieval.top_n).")
@click.option("--type", "types", type=TYPE_CHOICE, multiple=True,
              help="Only these types (repeatable).")
@click.option("--all", "include_inactive", is_flag=True,
              help="Include superseded and retracted memories.")
@click.option("--mode", type=click.Choice(["hybrid", "vector", "text"]), default="hybrid",
              show_default=True)
@click.option("--local", is_flag=True, help="Recall in this process even when a reader runs.")
@view_options
@tier_option
@click.option("--include-restricted", is_flag=True,
              help="Also restricted memories (needs --purpose; audited in memory.log).")
@click.option("--purpose", metavar="TEXT", help="Why restricted memories are read.")
@click.option("--as-of", "as_of", metavar="TIME",
              help="What was true at TIME (valid time; ISO 8601 with a time zone).")
@click.option("--known-at", "known_at", metavar="TIME",
              help="What had been stored by TIME (transaction time; ISO 8601 with a zone).")
@click.option("--latest", is_flag=True, help="Follow Updates chains to the newest memory.")
@click.option("--route/--no-route", default=None,
              help="Plan the recall by the kind of question (time window, neighbours, "
              "speakers), or not (default: memory.retrieval.router, on); the plan is in "
              "--json's output.")
@missing_ok_option
@json_option
@pass_cli
def recall(cli: Cli, orchestrator_id: str, query: str, top_n: int | None, types: tuple[str, ...],
           include_inactive: bool, mode: Mode, local: bool, missing_ok: bool,
           as_json: bool, session_id: str | None, project_id: str | None,
           tags: tuple[str, ...], include_restricted: bool, purpose: str | None,
           as_of: str | None, known_at: str | None, latest: bool,
           route: bool | None, tiers: tuple[str, ...]) -> None:
    """Recall the memories most relevant to QUERY (hybrid: vectors + full text, fused by RRF).

    When `orchmem up` runs (its reader answers within 0.5 s), the reader answers, in
    milliseconds. Otherwise, or with --local or another --mode, this process loads the
    embedding model (a few seconds, ~320 MB) and reads the database itself.
    """
    require_orchestrator(cli.settings, orchestrator_id, missing_ok)
    try:
        view = make_view(session_id, project_id, list(tags), include_restricted, purpose,
                         list(tiers) or None)
    except OrchmemError as exc:
        fail(exc, as_json)
        return
    timed = as_of is not None or known_at is not None or latest or route is not None
    bundle = None if local or mode != "hybrid" or view.include_restricted or timed else \
        from_reader(
        cli.settings, orchestrator_id, query, top_n=top_n, types=list(types) or None,
        include_inactive=include_inactive, view=view)
    via = "by the running reader" if bundle is not None else "in this process"
    if bundle is None:
        bundle = recall_memories(orchestrator_id, query,
                                 databases=Databases(cli.settings, readonly=True),
                                 top_n=top_n, types=list(types) or None,
                                 include_inactive=include_inactive, mode=mode, view=view,
                                 purpose=purpose, as_of=as_of, known_at=known_at,
                                 latest=latest, route=route)
    lines = []
    for item in bundle.nodes:
        m = item.memory
        lines.append(f"{item.rank:>3}. {m.type.value:<11} {m.memory_id}  score "
                     f"{item.scores.score:.5f} ({found_by(item.scores)})\n"
                     f"     {one_line(m.content, 100)}")
    lines.extend(f"warning: {w}" for w in bundle.warnings)
    if not bundle.nodes:
        lines.insert(0, "nothing relevant found")
    lines.append(f"({len(bundle.nodes)} memories, {len(bundle.edges)} edges, {bundle.took_ms} ms,"
                 f" recalled {via})")
    emit(bundle.dump(), as_json, "\n".join(lines))


@click.command()
@orch_option
@click.option("--wait", is_flag=True, help="Wait for the scan and print each file's outcome; "
              "files dropped less than memory.ingest.min_file_age_s ago are waited for "
              "(at most that long) and taken, not skipped.")
@json_option
@pass_cli
def ingest(cli: Cli, orchestrator_id: str, wait: bool, as_json: bool) -> None:
    """Scan the orchestrator's memory/ingest/ folder now (.txt, .md, .json files).

    Ingested files move to ingest/processed/, rejected ones to ingest/rejected/ beside
    a <name>.reason.json with a machine-readable reason.
    """
    settings = cli.settings
    if not settings.memory_for(orchestrator_id).ingest.enabled:
        raise click.ClickException(f"ingest is disabled for {orchestrator_id!r} "
                                   "(memory.ingest.enabled = false)")
    if wait:  # the files found now are waited for, not left as too new for the next scan
        workspace = Workspace.for_orchestrator(settings, orchestrator_id)
        time.sleep(max(0.0, settle_s(workspace, settings.memory_for(orchestrator_id).ingest)))
    stamp = time.strftime("%Y%m%dT%H%M%S")
    app = create_app(settings)
    _, result = publish(app, INGEST_SCAN, orchestrator_id, "ingest",
                        {"idempotencyKey": f"ingest-cli-{stamp}-{os.getpid()}"})
    folder = settings.runtime_root(orchestrator_id) / "memory" / "ingest"
    if not wait:
        emit({"ok": True, "taskId": result.id}, as_json, f"scan of {folder} published")
        return
    value = wait_for(result, settings.worker.wait_timeout_s, as_json)
    lines = [f"{f['outcome']:<9} {f['file']}" + (f"  ({f['reason']}: {f['detail']})"
                                                 if f.get("reason") else "")
             + (f"  {len(f['memoryIds'])} memories" if f.get("memoryIds") else "")
             for f in value["files"]]
    lines.append(f"{value['ingested']} ingested, {value['rejected']} rejected, "
                 f"{value['duplicate']} duplicate, {value['skipped']} skipped"
                 + (f", {value['remaining']} left for the next scan" if value["remaining"]
                    else ""))
    emit(value, as_json, "\n".join(lines))


@click.command()
@orch_option
@click.option("--timeout", type=float, help="Seconds to wait for the worker "
              "(default: memory.bulletin.timeout_s); then the last snapshot is shown.")
@click.option("--session", "session_id", metavar="S",
              help="The bulletin of this session (built here: global + its own).")
@click.option("--project", "project_id", metavar="P", help="The bulletin of this project.")
@click.option("--tag", "tags", multiple=True, metavar="T",
              help="Only memories with this tag (repeatable; built here).")
@json_option
@pass_cli
def bulletin(cli: Cli, orchestrator_id: str, timeout: float | None, as_json: bool,
             session_id: str | None, project_id: str | None, tags: tuple[str, ...]) -> None:
    """Build and show the orchestrator's bulletin (what is sent with every message)."""
    result = MemoryClient(orchestrator_id, cli.settings).bulletin(
        timeout=timeout, session_id=session_id, project_id=project_id, tags=tags)
    data = {**result.bulletin, "source": result.source, "warnings": result.warnings,
            "text": result.text}
    note = f"({result.source}, generated {result.bulletin.get('generatedAt')})"
    lines = [result.text, note, *(f"warning: {w}" for w in result.warnings)]
    emit(data, as_json, "\n".join(lines))


COMMANDS = [write, list_, stats, recall, ingest, bulletin]
