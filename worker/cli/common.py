"""Shared pieces of the CLI: the context object, options, output helpers."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from orchmem.config import (
    OrchmemError,
    Settings,
    UnknownOrchestrator,
    check_orchestrator_id,
    load_settings,
)
from orchmem.models.core.shapes import MemoryType, Status
from orchmem.models.storage.db.database import known_orchestrators

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
#: ``--type``: a memory type in any case ("fact"), handed on as its stored name ("Fact").
TYPE_CHOICE = click.Choice(TYPES, case_sensitive=False)
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


#: Exit codes of every command (docs/guide/commands.md#options-errors-and-exit-codes):
#: 0 done; 1 an error; 2 bad usage or invalid input; 3 an unknown orchestrator or
#: memory; 4 no worker or broker answered.
EXIT_ERROR, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_UNAVAILABLE = 1, 2, 3, 4
_EXIT_BY_CODE = {"validation": EXIT_USAGE, "not_found": EXIT_NOT_FOUND,
                 "broker_unavailable": EXIT_UNAVAILABLE, "timeout": EXIT_UNAVAILABLE}


def exit_code(error_code: str) -> int:
    """The process exit code for an error's machine-readable ``error_code``."""
    return _EXIT_BY_CODE.get(error_code, EXIT_ERROR)


def fail(exc: OrchmemError, as_json: bool = False, code: int | None = None) -> None:
    """Report ``exc`` (as JSON with ``--json``) and exit with ``code`` (default: by its kind)."""
    if as_json:
        click.echo(json.dumps({"ok": False, **exc.to_dict()}, indent=2))
    else:
        click.echo(f"Error: {exc}", err=True)
    sys.exit(exit_code(exc.code) if code is None else code)


def require_orchestrator(settings: Settings, orchestrator_id: str,
                         missing_ok: bool = False) -> bool:
    """Whether ``orchestrator_id`` is known here (a folder under the root, or a settings
    entry). An unknown one raises UnknownOrchestrator, naming the known ones, unless
    ``missing_ok`` (then False: the caller answers empty)."""
    check_orchestrator_id(orchestrator_id)
    if orchestrator_id in settings.orchestrators or \
            settings.runtime_root(orchestrator_id).is_dir():
        return True
    if missing_ok:
        return False
    known = known_orchestrators(settings)
    shown = ", ".join(known[:20]) + (f" (+{len(known) - 20} more)" if len(known) > 20 else "")
    raise UnknownOrchestrator(f"no orchestrator {orchestrator_id!r} under {settings.root}; "
                              f"known: {shown or 'none yet'}")


def missing_ok_option(func: F) -> F:
    return click.option("--missing-ok", is_flag=True,
                        help="An unknown orchestrator gives an empty answer, not an error.")(func)


def one_line(text: str, width: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"

