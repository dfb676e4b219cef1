"""``orchmem token create|list|revoke``: the bearer tokens of the HTTP API and MCP server."""

from __future__ import annotations

import click

from orchmem.worker.api.tokens import TokenStore
from orchmem.worker.cli.common import Cli, emit, json_option, orch_option, pass_cli


@click.group()
def token() -> None:
    """API tokens: each bound to one orchestrator; only their SHA-256 is stored
    (<root>/api/tokens.json, mode 0600)."""


@token.command()
@orch_option
@json_option
@pass_cli
def create(cli: Cli, orchestrator_id: str, as_json: bool) -> None:
    """Create a token for ID and print it once (it cannot be shown again).

    Only the token goes to stdout (`TOKEN=$(orchmem token create --orch ID)`); the
    reminder goes to stderr."""
    secret, record = TokenStore(cli.settings).create(orchestrator_id)
    emit({**record.public(), "token": secret}, as_json, secret)
    if not as_json:
        click.echo(f"(token id {record.token_id} for {orchestrator_id}: store it now, "
                   "it is not shown again)", err=True)


@token.command(name="list")
@orch_option
@json_option
@pass_cli
def list_(cli: Cli, orchestrator_id: str, as_json: bool) -> None:
    """List ID's tokens: ids and creation times, never the secrets."""
    records = TokenStore(cli.settings).of(orchestrator_id)
    emit({"orchestratorId": orchestrator_id, "tokens": [r.public() for r in records]}, as_json,
         "\n".join(f"{r.token_id}  created {r.created_at}" for r in records) or "no tokens")


@token.command()
@orch_option
@click.argument("token_id", required=False)
@click.option("--all", "revoke_all", is_flag=True, help="Revoke every token of ID.")
@json_option
@pass_cli
def revoke(cli: Cli, orchestrator_id: str, token_id: str | None, revoke_all: bool,
           as_json: bool) -> None:
    """Revoke TOKEN_ID of ID (or --all of them); a running server refuses it at once."""
    if (token_id is None) == (not revoke_all):
        raise click.UsageError("give exactly one of TOKEN_ID or --all")
    gone = TokenStore(cli.settings).revoke(orchestrator_id, token_id)
    emit({"orchestratorId": orchestrator_id, "revoked": gone}, as_json,
         f"revoked {len(gone)} token(s)" + (f": {', '.join(gone)}" if gone else ""))


COMMANDS = [token]
