"""``orchmem mcp``: the MCP server of one orchestrator, over stdio."""

from __future__ import annotations

import click

from orchmem.config import check_orchestrator_id

from .common import Cli, orch_option, pass_cli


@click.command()
@orch_option
@click.option("--immediate", is_flag=True,
              help="Run writes in this process: no broker or worker (one host; this process "
              "must then be the orchestrator's only writer).")
@pass_cli
def mcp(cli: Cli, orchestrator_id: str, immediate: bool) -> None:
    """Serve ID's memory to an MCP client over stdio: tools remember, recall, bulletin,
    forget, supersede and the resource memory://bulletin."""
    from ..mcp_server import create_mcp

    check_orchestrator_id(orchestrator_id)
    create_mcp(cli.settings, orchestrator_id, immediate=immediate).run("stdio")


COMMANDS = [mcp]
