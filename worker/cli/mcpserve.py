"""``orchmem mcp``: the MCP server of one orchestrator, over stdio."""

from __future__ import annotations

import logging

import click

from orchmem.config import check_orchestrator_id
from orchmem.worker.cli.common import Cli, orch_option, pass_cli
from orchmem.worker.cli.serve import check_bind, with_overrides


@click.command()
@orch_option
@click.option("--immediate", is_flag=True,
              help="Run writes in this process: no broker or worker (one host; this process "
              "must then be the orchestrator's only writer).")
@click.option("--http", is_flag=True, help="Serve streamable HTTP at /mcp instead of stdio "
              "(every request needs a bearer token of ID: `orchmem token create`).")
@click.option("--address", help="With --http: address (default: api.address).")
@click.option("--port", type=click.IntRange(1, 65_535), default=8766, show_default=True,
              help="With --http: port.")
@pass_cli
def mcp(cli: Cli, orchestrator_id: str, immediate: bool, http: bool, address: str | None,
        port: int) -> None:
    """Serve ID's memory to an MCP client (stdio, or --http): tools remember, recall,
    bulletin, forget, supersede and the resource memory://bulletin."""
    check_orchestrator_id(orchestrator_id)
    if not http:
        from orchmem.worker.mcp.server import create_mcp

        create_mcp(cli.settings, orchestrator_id, immediate=immediate).run("stdio")
        return
    import uvicorn

    from orchmem.worker.api.tokens import TokenStore
    from orchmem.worker.mcp.http import mcp_http_app

    settings = with_overrides(cli.settings, address=address)
    store = TokenStore(settings)
    check_bind(settings, store)
    logging.getLogger("orchmem.api.access").setLevel(logging.INFO)
    app, _ = mcp_http_app(settings, orchestrator_id, immediate=immediate, store=store)
    uvicorn.run(app, host=settings.api.address, port=port, access_log=False,
                log_level="info", server_header=False)


COMMANDS = [mcp]
