"""Every ``orchmem`` command and subcommand answers ``--help`` (no services needed)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from orchmem.worker.cli.main import main


def _walk(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                        click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = [(path, group)]
    for name, command in sorted(group.commands.items()):
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
