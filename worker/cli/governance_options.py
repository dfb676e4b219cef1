"""The governance options that ``write``, ``list`` and ``recall`` take."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from orchmem.models.core.governance_fields import Scope, Sensitivity, Tier

F = TypeVar("F", bound=Callable[..., Any])
TIERS = [t.value for t in Tier]
SCOPES = [s.value for s in Scope]
SENSITIVITIES = [s.value for s in Sensitivity]


def view_options(func: F) -> F:
    """--session, --project, --tag: what a read sees (global + its own; all tags)."""
    for option in reversed((
            click.option("--session", "session_id", metavar="S",
                         help="See this session's memories too (never another's)."),
            click.option("--project", "project_id", metavar="P",
                         help="See this project's memories too."),
            click.option("--tag", "tags", multiple=True, metavar="T",
                         help="Only memories with this tag (repeatable: all of them)."))):
        func = option(func)
    return func


def tier_option(func: F) -> F:
    """--tier (repeatable): only memories of these tiers."""
    return click.option("--tier", "tiers", type=click.Choice(TIERS), multiple=True,
                        help="Only memories of this tier (repeatable: any of them).")(func)


def write_options(func: F) -> F:
    """--tier, --scope, --session, --project, --sensitivity, --tag of ``write``."""
    for option in reversed((
            click.option("--tier", type=click.Choice(TIERS), help="Default: by type."),
            click.option("--scope", type=click.Choice(SCOPES), default="global",
                         show_default=True),
            click.option("--session", "session_id", metavar="S",
                         help="Its session (required by --scope session)."),
            click.option("--project", "project_id", metavar="P",
                         help="Its project (required by --scope project)."),
            click.option("--sensitivity", type=click.Choice(SENSITIVITIES),
                         help="Default: internal, or restricted when it holds a secret."),
            click.option("--tag", "tags", multiple=True, metavar="T",
                         help="A label (repeatable)."))):
        func = option(func)
    return func


def governance_fields(tier: str | None, scope: str, session_id: str | None,
                      project_id: str | None, sensitivity: str | None,
                      tags: tuple[str, ...]) -> dict[str, Any]:
    """The memory JSON of ``write``'s governance options (unset ones left out)."""
    given = {"tier": tier, "scope": scope, "sessionId": session_id, "projectId": project_id,
             "sensitivity": sensitivity, "tags": list(tags) or None}
    return {k: v for k, v in given.items() if v is not None}
