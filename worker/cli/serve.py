"""``orchmem serve``: the HTTP API, served by uvicorn."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import click

from orchmem.config import ConfigError, Settings
from orchmem.config.settings import ApiSettings
from orchmem.worker.api.tokens import TokenStore
from orchmem.worker.cli.common import Cli, pass_cli


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
@pass_cli
def serve(cli: Cli, address: str | None, port: int | None, immediate: bool | None) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json): each request needs a bearer token
    of the orchestrator it names (`orchmem token create`)."""
    import uvicorn

    from orchmem.worker.api.app import create_api
    from orchmem.worker.api.server import server_config

    settings = with_overrides(cli.settings, address=address, port=port, immediate=immediate)
    store = TokenStore(settings)
    check_bind(settings, store)
    logging.getLogger("orchmem.api.access").setLevel(logging.INFO)
    click.echo(f"orchmem API on http://{settings.api.address}:{settings.api.port} "
               f"({'immediate' if settings.api.immediate else 'broker'} mode)", err=True)
    uvicorn.Server(server_config(create_api(settings, store), settings)).run()


COMMANDS = [serve]
