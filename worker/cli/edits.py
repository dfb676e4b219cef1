"""Edit commands: ``supersede``, ``retract``, ``link``, and ``history`` (``forget``,
``patch`` and ``invalidate`` are in governance.py)."""

from __future__ import annotations

import json
from typing import Any

import click

from orchmem.config import OrchmemError
from orchmem.models.core.shapes import EdgeType
from orchmem.models.governance.history import history as memory_history
from orchmem.models.storage.visibility import make_view
from orchmem.tasks.edits import EDIT
from orchmem.worker.cli.common import (
    TYPE_CHOICE,
    Cli,
    emit,
    fail,
    json_option,
    one_line,
    orch_option,
    pass_cli,
)
from orchmem.worker.cli.governance_options import view_options
from orchmem.worker.cli.memory import open_existing, wait_for
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish

EDGE_TYPES = [t.value for t in EdgeType]


def _run_edit(cli: Cli, orchestrator_id: str, payload: dict[str, Any], as_json: bool,
              idempotency_key: str | None) -> dict[str, Any]:
    """Publish one edit (fields that are None left out) and wait for its result."""
    payload = {k: v for k, v in payload.items() if v is not None}
    if idempotency_key:
        payload["idempotencyKey"] = idempotency_key
    # An operator names memories that exist: a wrong id should fail now, not in a minute.
    payload["waitForMemoryS"] = 0
    try:
        app = create_app(cli.settings)
        _, result = publish(app, EDIT, orchestrator_id, "edit", payload)
    except OrchmemError as exc:
        fail(exc, as_json)
        raise
    return wait_for(result, cli.settings.worker.wait_timeout_s, as_json)


KEY = click.option("--idempotency-key", help="Edits with the same key happen once.")


@click.command()
@orch_option
@click.argument("memory_id")
@click.option("--by", "by", metavar="NEW_ID", help="The memory that replaces it.")
@click.option("--content", help="Or: the text of a new memory that replaces it.")
@click.option("--type", "memory_type", type=TYPE_CHOICE,
              help="Type of the new memory (default: the old one's).")
@click.option("--reason", help="Why (kept in the audit log).")
@KEY
@json_option
@pass_cli
def supersede(cli: Cli, orchestrator_id: str, memory_id: str, by: str | None,
              content: str | None, memory_type: str | None, reason: str | None,
              idempotency_key: str | None, as_json: bool) -> None:
    """Mark MEMORY_ID superseded by another memory (--by) or by new --content."""
    if (by is None) == (content is None):
        raise click.UsageError("give exactly one of --by NEW_ID or --content TEXT")
    payload = {"op": "supersede", "memoryId": memory_id, "by": by, "content": content,
               "type": memory_type, "reason": reason}
    value = _run_edit(cli, orchestrator_id, payload, as_json, idempotency_key)
    emit(value, as_json, f"{memory_id} superseded by {value['supersededBy']}")


@click.command()
@orch_option
@click.argument("memory_id")
@click.option("--reason", required=True, help="Why it is withdrawn (kept in the audit log).")
@KEY
@json_option
@pass_cli
def retract(cli: Cli, orchestrator_id: str, memory_id: str, reason: str,
            idempotency_key: str | None, as_json: bool) -> None:
    """Withdraw MEMORY_ID (status retracted; content kept, hidden from recall)."""
    value = _run_edit(cli, orchestrator_id, {"op": "retract", "memoryId": memory_id,
                                             "reason": reason}, as_json, idempotency_key)
    emit(value, as_json, f"{memory_id} retracted")


@click.command()
@orch_option
@click.argument("from_id")
@click.argument("to_id")
@click.option("--type", "edge_type", type=click.Choice(EDGE_TYPES), required=True)
@click.option("--weight", type=click.FloatRange(0.0, 1.0), default=1.0, show_default=True)
@click.option("--reason", help="Why they are linked.")
@KEY
@json_option
@pass_cli
def link(cli: Cli, orchestrator_id: str, from_id: str, to_id: str, edge_type: str,
         weight: float, reason: str | None, idempotency_key: str | None, as_json: bool) -> None:
    """Add a typed edge FROM_ID -> TO_ID."""
    payload = {"op": "link", "fromMemoryId": from_id, "toMemoryId": to_id,
               "edgeType": edge_type, "weight": weight, "reason": reason}
    value = _run_edit(cli, orchestrator_id, payload, as_json, idempotency_key)
    emit(value, as_json, f"linked {from_id} -[{edge_type}]-> {to_id} ({value['edgeIds'][0]})")


@click.command()
@orch_option
@click.argument("memory_id")
@view_options
@click.option("--include-restricted", is_flag=True,
              help="A restricted memory too (needs --purpose; audited in memory.log).")
@click.option("--purpose", metavar="TEXT", help="Why a restricted memory is read.")
@json_option
@pass_cli
def history(cli: Cli, orchestrator_id: str, memory_id: str, session_id: str | None,
            project_id: str | None, tags: tuple[str, ...], include_restricted: bool,
            purpose: str | None, as_json: bool) -> None:
    """Show a memory's audit events, edges and sources, as a read with --session /
    --project sees them (another session's memory, or a restricted one without
    --include-restricted, is not found)."""
    odb = open_existing(cli.settings, orchestrator_id, as_json)
    if odb is None:
        return
    try:
        view = make_view(session_id, project_id, list(tags), include_restricted, purpose)
        data = memory_history(odb, memory_id, view, requester="cli", purpose=purpose)
    except OrchmemError as exc:
        fail(exc, as_json)
        return
    m = data["memory"]
    lines = [f"{m['memoryId']}  {m['type']}  {m['status']}"
             + ("  (forgotten)" if m["forgotten"] else ""),
             f"  {one_line(m['content'], 100) or '(erased)'}", "events:"]
    for e in data["events"]:
        detail = json.dumps(e["after"]) if e["after"] else ""
        lines.append(f"  {e['at']}  {e['op']:<12} by {e['actor']:<9} {detail}"
                     + (f"  reason: {e['reason']}" if e["reason"] else ""))
    lines.append("edges:" if data["edges"] else "edges: none")
    for e in data["edges"]:
        lines.append(f"  {e['fromMemoryId']} -[{e['edgeType']}]-> {e['toMemoryId']}"
                     + (f"  ({e['reason']})" if e.get("reason") else ""))
    lines.append(f"sources: {len(data['sources'])}")
    for s in data["sources"]:
        where = s.get("conversationId") or s.get("workflowRunId") or s.get("sourcePath") or ""
        lines.append(f"  {s['capturedAt']}  {s['sourceType']} {where} ({s['capturedBy']})")
    emit(data, as_json, "\n".join(lines))


# `forget` (by id and by policy) is in governance.py
COMMANDS = [supersede, retract, link, history]
