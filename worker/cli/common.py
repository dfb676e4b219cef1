"""Shared pieces of the CLI: the context object, options, output helpers."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from orchmem.config import OrchmemError, Settings, load_settings
from orchmem.models.schema import MemoryType, Status

F = TypeVar("F", bound=Callable[..., Any])


class Cli:
    """What every command gets: the global options and lazily loaded settings."""

    def __init__(self, config: str | None, root: str | None) -> None:
        self.config = config
        self.root = root
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            overrides: dict[str, Any] = {}
            if self.root:
                overrides["root"] = Path(self.root)
            # A ConfigError goes up to OrchmemGroup, which honours --json.
            self._settings = load_settings(self.config, **overrides)
        return self._settings


pass_cli = click.make_pass_decorator(Cli)

TYPES = [t.value for t in MemoryType]
STATUSES = [s.value for s in Status]


def orch_option(func: F) -> F:
    return click.option("--orch", "orchestrator_id", required=True, metavar="ID",
                        help="The orchestratorId.")(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)


def emit(data: Any, as_json: bool, text: str | None = None) -> None:
    """Print ``data`` as JSON, or ``text`` for people."""
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    elif text is not None:
        click.echo(text)


def fail(exc: OrchmemError, as_json: bool = False, code: int = 1) -> None:
    """Report ``exc`` (as JSON with ``--json``) and exit with ``code``."""
    if as_json:
        click.echo(json.dumps({"ok": False, **exc.to_dict()}, indent=2))
    else:
        click.echo(f"Error: {exc}", err=True)
    sys.exit(code)


def one_line(text: str, width: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
