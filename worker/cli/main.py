"""The ``orchmem`` group and its commands."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from orchmem.config import OrchmemError
from orchmem.models.private import PROCESS_UMASK

from . import (
    durability,
    edits,
    governance,
    logcmd,
    mcpserve,
    memory,
    ops,
    portability,
    reader,
    reflection,
    serve,
    tokens,
)
from .common import Cli, fail


class OrchmemGroup(click.Group):
    """Reports orchmem's own errors as one line (``Error: …``), never a traceback."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The ``orchmem`` program (and ``python -m orchmem.worker``): the process owns
        its root, so whatever it or a library under it creates (Celery's log file,
        beat's schedule, Prometheus' files) is private, umask 077 (models/private.py).
        Click's test runner calls ``main()`` instead and leaves its host's umask alone."""
        os.umask(PROCESS_UMASK)
        return super().__call__(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except OrchmemError as exc:
            as_json = "--json" in sys.argv[1:]
            fail(exc, as_json)
            return None


@click.group(cls=OrchmemGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--config", type=click.Path(dir_okay=False),
              help="Settings file (TOML). Default: $ORCHMEM_CONFIG.")
@click.option("--root", type=click.Path(file_okay=False),
              help="Root folder (orchestrators, broker, logs). Default: $ORCHMEM_ROOT, ~/.orchmem.")
@click.version_option(package_name="orchmem")
@click.pass_context
def main(ctx: click.Context, config: str | None, root: str | None) -> None:
    """orchmem: long-term memory for agent orchestrators.

    Orchestrators publish write-back, ingest and bulletin tasks to Redis; Celery
    workers write them into each orchestrator's own SQLite file; recall reads that
    file directly. New here? Run `orchmem demo`, or `orchmem up` then `orchmem write`.
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = Cli(config, root)


for command in (*ops.COMMANDS, *memory.COMMANDS, *edits.COMMANDS, *portability.COMMANDS,
                *durability.COMMANDS, *governance.COMMANDS):
    main.add_command(command)
for command in (*tokens.COMMANDS, *serve.COMMANDS, *mcpserve.COMMANDS, *reader.COMMANDS,
                *logcmd.COMMANDS, *reflection.COMMANDS):
    main.add_command(command)
