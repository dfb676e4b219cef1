"""Keeping memory safe: ``rebuild``, ``backup``, ``restore``, ``migrate``."""

from __future__ import annotations

import sys
from typing import Any

import click

from orchmem.config import MemoryNotFound
from orchmem.models.embedding import get_embedder
from orchmem.models.rebuild import rebuild as rebuild_parts
from orchmem.models.storage.database import Databases, OrchestratorDB
from orchmem.tasks.bulletin import write_bulletin

from .common import Cli, emit, json_option, orch_option, pass_cli


def open_writer(cli: Cli, orchestrator_id: str) -> tuple[Databases, OrchestratorDB]:
    """A writer's handle on an existing orchestrator (MemoryNotFound when it has none)."""
    databases = Databases(cli.settings)
    odb = databases.open(orchestrator_id, create=False)
    if odb is None:
        raise MemoryNotFound(f"orchestrator {orchestrator_id!r} has no memory.db under "
                             f"{cli.settings.runtime_root(orchestrator_id)}")
    return databases, odb


@click.command()
@orch_option
@click.option("--fts", is_flag=True, help="Rebuild the full-text index.")
@click.option("--vectors", is_flag=True, help="Drop every vector and embed again.")
@click.option("--bulletin", is_flag=True, help="Write the bulletin snapshot again.")
@json_option
@pass_cli
def rebuild(cli: Cli, orchestrator_id: str, fts: bool, vectors: bool, bulletin: bool,
            as_json: bool) -> None:
    """Drop derived data and rebuild it from the records (all parts when none is named).

    Recall answers the same afterwards, ranks included. While vectors are rebuilt, recall
    answers from the vectors already made plus full text.
    """
    if not (fts or vectors or bulletin):
        fts = vectors = bulletin = True
    settings = cli.settings
    databases, odb = open_writer(cli, orchestrator_id)
    bars: dict[str, Any] = {}

    def progress(part: str, done: int, total: int) -> None:
        bar = bars.get(part)
        if bar is None:
            bar = bars[part] = click.progressbar(length=max(total, 1), label=part,
                                                 file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)
        if done >= total:
            bar.__exit__(None, None, None)

    try:
        report = rebuild_parts(
            odb, fts=fts, vectors=vectors,
            bulletin=(lambda: write_bulletin(odb)) if bulletin else None,
            embedder=get_embedder(settings.embedding) if vectors else None,
            batch_size=settings.embedding.batch_size, progress=progress)
    finally:
        databases.close_all()
    emit({"ok": True, "orchestratorId": orchestrator_id, **report}, as_json,
         "\n".join(f"{part}: " + ", ".join(f"{k} {v}" for k, v in done.items())
                   for part, done in report.items()))


COMMANDS = [rebuild]
