"""The ``orchmem`` group and its commands.

Commands are loaded on demand (``catalog.COMMANDS``): ``orchmem --version`` and
``orchmem --help`` import click and nothing of celery, numpy or torch, and a command
imports only its own module.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

import click

from orchmem.worker.cli.catalog import COMMANDS

#: The process umask of an ``orchmem`` program: models/workspace/private.py's PROCESS_UMASK,
#: written out here so that ``--version`` and ``--help`` import nothing of the models
#: (tests/unit/workspace/test_private.py checks the two agree).
PROCESS_UMASK = 0o077


class OrchmemGroup(click.Group):
    """Loads each command from the catalogue when it is needed, and reports orchmem's
    own errors as one line (``Error: …``), never a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, sorted, without importing any of them."""
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, importing its module the first time."""
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            loaded = importlib.import_module(f"{__package__}.{module}")
            self.add_command(getattr(loaded, attribute), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of ``--help``, from the catalogue's summaries."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        # A stand-in command shortens the summary exactly as the real one's help would be.
        rows = [(name, click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit))
                for name in names if name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The ``orchmem`` program (and ``python -m orchmem.worker``): the process owns
        its root, so whatever it or a library under it creates (Celery's log file,
        beat's schedule, Prometheus' files) is private, umask 077 (models/workspace/private.py).
        Click's test runner calls ``main()`` instead and leaves its host's umask alone."""
        os.umask(PROCESS_UMASK)
        return super().__call__(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> object:
        """Run the command; an OrchmemError becomes one ``Error:`` line and its exit code."""
        from orchmem.config import OrchmemError
        from orchmem.worker.cli.common import fail

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
    from orchmem.worker.cli.common import Cli

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = Cli(config, root)
