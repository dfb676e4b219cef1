"""Governance commands: ``forget`` by id and by policy, ``recover``, ``patch``,
``invalidate``."""

from __future__ import annotations

import uuid

import click

from orchmem.config import OrchmemError
from orchmem.tasks.retention import RETENTION
from orchmem.worker.cli.common import Cli, emit, fail, json_option, orch_option, pass_cli
from orchmem.worker.cli.edits import KEY, _run_edit
from orchmem.worker.cli.governance_options import SCOPES, SENSITIVITIES, TIERS
from orchmem.worker.cli.memory import wait_for
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish


@click.command()
@orch_option
@click.argument("memory_ids", nargs=-1, metavar="[MEMORY_ID]...")
@click.option("--before", metavar="ISO", help="Created before this date or timestamp.")
@click.option("--session", "session_id", metavar="S", help="Of this session.")
@click.option("--project", "project_id", metavar="P", help="Of this project.")
@click.option("--conversation", "conversation_id", metavar="C",
              help="Said in this conversation (any of its sources).")
@click.option("--run", "workflow_run_id", metavar="R", help="From this workflow run.")
@click.option("--file", "source_path", metavar="PATH", help="From this ingested file "
              "(absolute, or its name as dropped in memory/ingest/).")
@click.option("--tag", "tags", multiple=True, metavar="T", help="With this tag (repeatable).")
@click.option("--tier", "tiers", type=click.Choice(TIERS), multiple=True,
              help="Of this tier (repeatable: any of them).")
@click.option("--scope", type=click.Choice(SCOPES), help="Of this scope (e.g. every "
              "session-scoped memory).")
@click.option("--hard", is_flag=True, help="Erase (content, vector, full text, sources; a "
              "tombstone stays). Default: soft (retracted, content kept).")
@click.option("--dry-run", is_flag=True, help="List what would be forgotten; change nothing.")
@click.option("--reason", help="Why (kept in the audit log).")
@KEY
@json_option
@pass_cli
def forget(cli: Cli, orchestrator_id: str, memory_ids: tuple[str, ...], before: str | None,
           session_id: str | None, project_id: str | None, conversation_id: str | None,
           workflow_run_id: str | None, source_path: str | None, tags: tuple[str, ...],
           hard: bool, dry_run: bool, reason: str | None, idempotency_key: str | None,
           as_json: bool, tiers: tuple[str, ...], scope: str | None) -> None:
    """Forget memories by id and/or policy (every selector given must match).

    Prints {"count": n, "memoryIds": [...]} with --json. A forget that matches nothing
    forgets nothing (count 0).
    """
    payload = {"op": "forget_policy", "memoryIds": list(memory_ids), "before": before,
               "sessionId": session_id, "projectId": project_id,
               "conversationId": conversation_id, "workflowRunId": workflow_run_id,
               "sourcePath": source_path, "tags": list(tags), "hard": hard,
               "dryRun": dry_run, "reason": reason, "tiers": list(tiers), "scope": scope}
    value = _run_edit(cli, orchestrator_id, payload, as_json,
                      idempotency_key or f"forget-cli-{uuid.uuid4().hex}")
    how = "would be forgotten" if dry_run else ("forgotten (hard: erased)" if hard
                                                else "forgotten (soft)")
    emit(value, as_json, "\n".join([*value["memoryIds"], f"{value['count']} {how}"]))


@click.command()
@orch_option
@click.argument("memory_id")
@click.option("--reason", help="Why (kept in the audit log).")
@KEY
@json_option
@pass_cli
def recover(cli: Cli, orchestrator_id: str, memory_id: str, reason: str | None,
            idempotency_key: str | None, as_json: bool) -> None:
    """Make a soft-forgotten (retracted) MEMORY_ID active again; a hard-forgotten one is
    erased and cannot come back (error code erased)."""
    value = _run_edit(cli, orchestrator_id, {"op": "recover", "memoryId": memory_id,
                                             "reason": reason}, as_json, idempotency_key)
    emit(value, as_json, f"{memory_id} recovered (active)")


@click.command()
@orch_option
@click.argument("memory_id")
@click.option("--importance", type=click.IntRange(0, 100))
@click.option("--confidence", type=click.FloatRange(0.0, 1.0))
@click.option("--summary")
@click.option("--tier", type=click.Choice(TIERS))
@click.option("--scope", type=click.Choice(SCOPES))
@click.option("--session", "session_id", metavar="S")
@click.option("--project", "project_id", metavar="P")
@click.option("--sensitivity", type=click.Choice(SENSITIVITIES))
@click.option("--tag", "tags", multiple=True, metavar="T", help="Replace the tags "
              "(repeatable).")
@click.option("--reason", help="Why (kept in the audit log).")
@KEY
@json_option
@pass_cli
def patch(cli: Cli, orchestrator_id: str, memory_id: str, importance: int | None,
          confidence: float | None, summary: str | None, tier: str | None,
          scope: str | None, session_id: str | None, project_id: str | None,
          sensitivity: str | None, tags: tuple[str, ...], reason: str | None,
          idempotency_key: str | None, as_json: bool) -> None:
    """Change fields of MEMORY_ID in place (a content change is `supersede`)."""
    payload = {"op": "patch", "memoryId": memory_id, "importance": importance,
               "confidence": confidence, "summary": summary, "tier": tier, "scope": scope,
               "sessionId": session_id, "projectId": project_id,
               "sensitivity": sensitivity, "tags": list(tags) or None, "reason": reason}
    value = _run_edit(cli, orchestrator_id, payload, as_json, idempotency_key)
    emit(value, as_json, f"{memory_id} patched: {', '.join(value['fields'])}")


@click.command()
@orch_option
@click.argument("memory_id")
@click.option("--reason", required=True, help="What was wrong (kept in the audit log).")
@KEY
@json_option
@pass_cli
def invalidate(cli: Cli, orchestrator_id: str, memory_id: str, reason: str,
               idempotency_key: str | None, as_json: bool) -> None:
    """Mark MEMORY_ID wrong (retracted, audited as invalidate)."""
    value = _run_edit(cli, orchestrator_id, {"op": "invalidate", "memoryId": memory_id,
                                             "reason": reason}, as_json, idempotency_key)
    emit(value, as_json, f"{memory_id} invalidated")


@click.command()
@orch_option
@click.option("--dry-run", is_flag=True, help="Count what the rules would forget.")
@click.option("--archive-log-before", metavar="T",
              help="Also archive the execution log's events recorded before T (ISO 8601).")
@json_option
@pass_cli
def retention(cli: Cli, orchestrator_id: str, dry_run: bool, archive_log_before: str | None,
              as_json: bool) -> None:
    """Apply the retention rules (memory.governance.retention) now, as beat does daily."""
    cut = {"archiveLogBefore": archive_log_before} if archive_log_before else {}
    try:
        _, result = publish(create_app(cli.settings), RETENTION, orchestrator_id, "retention",
                            {"idempotencyKey": f"retention-cli-{uuid.uuid4().hex}",
                             "dryRun": dry_run, **cut})
    except OrchmemError as exc:
        fail(exc, as_json)
        return
    value = wait_for(result, cli.settings.worker.wait_timeout_s, as_json)
    how = "would be forgotten" if dry_run else "forgotten"
    emit(value, as_json, f"{value['count']} {how} ({value['soft']} soft, {value['hard']} hard)")


COMMANDS = [forget, recover, patch, invalidate, retention]
