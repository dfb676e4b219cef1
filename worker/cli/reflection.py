"""Reflection commands: ``topics``, ``reflect`` and ``review list|accept|reject``."""

from __future__ import annotations

import uuid
from typing import Any

import click

from orchmem.config import OrchmemError
from orchmem.models.storage.reflection.insights import list_proposals
from orchmem.models.storage.reflection.units import topic_counts
from orchmem.tasks.reflect import REFLECT, REVIEW
from orchmem.worker.cli.common import Cli, emit, fail, json_option, one_line, orch_option, pass_cli
from orchmem.worker.cli.memory import open_existing, wait_for
from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.publish import publish


@click.command()
@orch_option
@json_option
@pass_cli
def topics(cli: Cli, orchestrator_id: str, as_json: bool) -> None:
    """List the topics of active memories with their counts (and crystals)."""
    odb = open_existing(cli.settings, orchestrator_id, as_json)
    if odb is None:
        return
    try:
        with odb.read():
            rows = topic_counts(odb)
    except OrchmemError as exc:
        fail(exc, as_json)
        return
    data = {"orchestratorId": orchestrator_id,
            "topics": [{"topic": t, "memories": n, "crystalId": c} for t, n, c in rows]}
    lines = [f"{n:>5}  {t}" + (f"  (crystal {c})" if c else "") for t, n, c in rows]
    emit(data, as_json, "\n".join(lines) or "no topics yet (run `orchmem reflect`)")


@click.command()
@orch_option
@click.option("--wait", is_flag=True, help="Wait for the run and print its counts.")
@json_option
@pass_cli
def reflect(cli: Cli, orchestrator_id: str, wait: bool, as_json: bool) -> None:
    """Reflect now (through the queue): topics, insights, proposals, crystals, working.md."""
    try:
        _, result = publish(create_app(cli.settings), REFLECT, orchestrator_id, "reflect",
                            {"idempotencyKey": f"reflect-cli-{uuid.uuid4().hex}"})
    except OrchmemError as exc:
        fail(exc, as_json)
        return
    if not wait:
        emit({"ok": True, "taskId": result.id}, as_json, f"reflection of {orchestrator_id} "
             "published")
        return
    value = wait_for(result, cli.settings.worker.wait_timeout_s, as_json)
    emit(value, as_json, (
        f"{value['units']} memories in {value['topics']} topics ({value['topicsChanged']} "
        f"moved); {value['proposals']} new proposals ({value['autoApplied']} applied); "
        f"{value['crystals']} crystals ({value['crystalsBuilt']} built, "
        f"{value['crystalsRetracted']} retracted); conflicts +{value['conflictsOpened']} "
        f"-{value['conflictsDismissed']}; working.md "
        f"{'written' if value['working'] else 'unchanged'} ({value['totalSeconds']} s)"))


@click.group()
def review() -> None:
    """Review evolves proposals: list, accept, reject."""


@review.command("list")
@orch_option
@click.option("--status", type=click.Choice(["pending", "accepted", "rejected", "all"]),
              default="pending", show_default=True)
@json_option
@pass_cli
def review_list(cli: Cli, orchestrator_id: str, status: str, as_json: bool) -> None:
    """Proposals newest first, with their relation, reason and confidence."""
    odb = open_existing(cli.settings, orchestrator_id, as_json)
    if odb is None:
        return
    try:
        found = list_proposals(odb, None if status == "all" else status)
    except OrchmemError as exc:
        fail(exc, as_json)
        return
    lines = [f"{p.proposal_id}  {p.status:<8} {p.newer_id} {p.relation} {p.older_id}  "
             f"({p.confidence:.2f}: {one_line(p.reason, 60)})" for p in found]
    emit({"orchestratorId": orchestrator_id, "proposals": [p.to_dict() for p in found]},
         as_json, "\n".join(lines) or f"no {status} proposals")


def _decide(cli: Cli, orchestrator_id: str, payload: dict[str, Any],
            as_json: bool) -> dict[str, Any]:
    payload = {"idempotencyKey": f"review-cli-{uuid.uuid4().hex}",
               **{k: v for k, v in payload.items() if v is not None}}
    try:
        _, result = publish(create_app(cli.settings), REVIEW, orchestrator_id, "review",
                            payload)
    except OrchmemError as exc:
        fail(exc, as_json)
        raise
    return wait_for(result, cli.settings.worker.wait_timeout_s, as_json)


@review.command("accept")
@orch_option
@click.argument("proposal_id")
@click.option("--reason", help="Why (kept in the audit log).")
@json_option
@pass_cli
def review_accept(cli: Cli, orchestrator_id: str, proposal_id: str, reason: str | None,
                  as_json: bool) -> None:
    """Accept PROPOSAL_ID: replaces/challenges supersede the older memory."""
    value = _decide(cli, orchestrator_id, {"op": "accept", "proposalId": proposal_id,
                                           "reason": reason}, as_json)
    gone = ", ".join(value["superseded"]) or "nothing"
    emit(value, as_json, f"{proposal_id} accepted ({value['relation']}); superseded: {gone}")


@review.command("reject")
@orch_option
@click.argument("proposal_id")
@click.option("--reason", help="Why (kept with the proposal).")
@json_option
@pass_cli
def review_reject(cli: Cli, orchestrator_id: str, proposal_id: str, reason: str | None,
                  as_json: bool) -> None:
    """Reject PROPOSAL_ID: kept as rejected, never proposed again."""
    value = _decide(cli, orchestrator_id, {"op": "reject", "proposalId": proposal_id,
                                           "reason": reason}, as_json)
    emit(value, as_json, f"{proposal_id} rejected")


COMMANDS = [topics, reflect, review]
