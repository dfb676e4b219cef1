"""Every ``orchmem`` command and subcommand answers ``--help`` (no services needed), and
``orchmem --version`` / ``--help`` start without loading the services' libraries."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

import orchmem.worker
from orchmem.worker.cli.catalog import COMMANDS as CATALOGUE
from orchmem.worker.cli.main import main


def _walk(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                        click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = [(path, group)]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found += _walk(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


COMMANDS = _walk(main)


def test_the_walk_finds_every_command_and_the_deadletter_subcommands() -> None:
    paths = {" ".join(path) for path, _ in COMMANDS}
    assert {"", "up", "write", "recall", "check", "demo", "deadletter list",
            "deadletter retry"} <= paths


@pytest.mark.parametrize(("path", "command"), COMMANDS,
                         ids=[" ".join(path) or "orchmem" for path, _ in COMMANDS])
def test_every_command_answers_help_with_a_description(path: tuple[str, ...],
                                                       command: click.Command) -> None:
    result = CliRunner().invoke(main, [*path, "--help"], prog_name="orchmem")
    assert result.exit_code == 0, result.output
    description = (command.help or "").strip()
    assert description, f"`orchmem {' '.join(path)}` has no description"
    assert result.output.startswith(f"Usage: orchmem {' '.join(path)}".rstrip())
    first_paragraph = " ".join(description.split("\n\n")[0].split())
    assert first_paragraph in " ".join(result.output.split())


def test_the_catalogue_names_every_command_with_its_own_short_help() -> None:
    modules = ("durability", "edits", "governance", "logcmd", "memory", "ops",
               "portability", "reader", "reflection", "serve", "tokens")
    defined = {command.name for module in modules for command in
               importlib.import_module(f"orchmem.worker.cli.{module}").COMMANDS}
    assert set(CATALOGUE) == defined
    ctx = click.Context(main)
    for name, (_, _, summary) in CATALOGUE.items():
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name
        assert summary == command.get_short_help_str(limit=1000), name


#: What `orchmem --version` and `orchmem --help` must start without.
HEAVY = ("celery", "kombu", "redis", "numpy", "torch", "sentence_transformers", "onnxruntime",
         "fastapi", "uvicorn", "mcp", "peewee", "orchmem.models", "orchmem.tasks",
         "orchmem.worker.client.memory_client")


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_no_service_or_model_library(flag: str) -> None:
    probe = ("import json, sys\n"
             "from orchmem.worker.cli import main\n"
             "try:\n"
             f"    main([{flag!r}], prog_name='orchmem')\n"
             "except SystemExit as exc:\n"
             "    code = exc.code\n"
             f"print(json.dumps([code, sorted(m for m in {HEAVY!r} if m in sys.modules)]),"
             " file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    code, loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert code == 0, done.stderr
    assert loaded == [], f"`orchmem {flag}` imported {loaded}"
    assert done.stdout.strip(), "it printed its answer"


def test_the_public_names_still_import_from_orchmem_worker() -> None:
    from orchmem.worker import MemoryClient, RecallBundle, load_settings
    from orchmem.worker.client.memory_client import MemoryClient as defined

    assert MemoryClient is defined
    assert RecallBundle.__name__ == "RecallBundle" and callable(load_settings)
    with pytest.raises(AttributeError):
        _ = orchmem.worker.NoSuchName  # type: ignore[attr-defined]
