"""Serving one root's memory to other processes: ``orchmem serve`` (the HTTP API, by
uvicorn) and ``orchmem mcp`` (the MCP server of one orchestrator, over stdio or HTTP)."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import click

from orchmem.config import ConfigError, Settings, check_orchestrator_id
from orchmem.config.settings import ApiSettings
from orchmem.worker.api.tokens import TokenStore
from orchmem.worker.cli.common import Cli, orch_option, pass_cli


def is_loopback(address: str) -> bool:
    """Whether ``address`` only accepts connections from this host."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def check_bind(settings: Settings, store: TokenStore) -> None:
    """Refuse to listen off loopback while no token exists (every request would be
    refused, and the next `token create` would open the server to the network
    unnoticed). Raises ConfigError."""
    address = settings.api.address
    if not is_loopback(address) and not store.any():
        raise ConfigError(f"refusing to listen on {address}: no API token exists. Create one "
                          "with `orchmem token create --orch ID`, or listen on 127.0.0.1.")


def with_overrides(settings: Settings, **changes: Any) -> Settings:
    """``settings`` with ``api.*`` values replaced (None leaves a value as it is)."""
    values = {**settings.api.model_dump(), **{k: v for k, v in changes.items()
                                              if v is not None}}
    return settings.model_copy(update={"api": ApiSettings.model_validate(values)})


@click.command()
@click.option("--address", help="Address to listen on (default: api.address, 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65_535), help="Port (default: api.port, 8765).")
@click.option("--immediate", is_flag=True, default=None,
              help="Run tasks in this process: no broker or worker (one host; the server "
              "must then be the orchestrators' only writer).")
@click.option("--metrics-port", type=click.IntRange(0, 65_535), default=0,
              help="Serve Prometheus metrics of this server's recalls and context blocks "
              "(latency, hits, context budget use, projection lag) on this port, at "
              "worker.metrics_address (default 0 = off).")
@pass_cli
def serve(cli: Cli, address: str | None, port: int | None, immediate: bool | None,
          metrics_port: int) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json) and the web console (/console): each
    request needs a token of the orchestrator it names (`orchmem token create`)."""
    import uvicorn

    from orchmem.worker.api.app import create_api
    from orchmem.worker.api.server import server_config

    settings = with_overrides(cli.settings, address=address, port=port, immediate=immediate)
    store = TokenStore(settings)
    check_bind(settings, store)
    logging.getLogger("orchmem.api.access").setLevel(logging.INFO)
    if metrics_port:
        from orchmem.worker.runtime.metrics import serve_process_metrics

        serve_process_metrics(settings, metrics_port)
    click.echo(f"orchmem API on http://{settings.api.address}:{settings.api.port} "
               f"({'immediate' if settings.api.immediate else 'broker'} mode); console at "
               "/console/", err=True)
    uvicorn.Server(server_config(create_api(settings, store), settings)).run()



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



COMMANDS = [serve, mcp]
