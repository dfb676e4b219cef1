"""Keeping memory safe: ``rebuild``, ``backup``, ``restore``, ``migrate``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from orchmem.config import ImportRejected, MemoryNotFound, OrchmemError, Settings
from orchmem.models.embedding.device import bulk_embedder
from orchmem.models.execlog.tape import rebuild_from_log
from orchmem.models.portability.rebuild import rebuild as rebuild_parts
from orchmem.models.storage.db.backup import (
    check_backup,
    list_backups,
    prune,
    restore_backup,
    take_backup,
)
from orchmem.models.storage.db.database import Databases, OrchestratorDB, known_orchestrators
from orchmem.models.storage.db.degraded import clear_degraded, degraded_info
from orchmem.models.storage.schema.migrations import (
    MIGRATIONS,
    SCHEMA_VERSION,
    DowngradeRefused,
    MigrationFailed,
    downgrade,
    pending,
)
from orchmem.models.workspace.folders import Workspace
from orchmem.tasks.bulletin import write_bulletin
from orchmem.worker.cli.common import (
    Cli,
    emit,
    fail,
    json_option,
    orch_option,
    pass_cli,
    require_orchestrator,
)


def open_writer(cli: Cli, orchestrator_id: str) -> tuple[Databases, OrchestratorDB]:
    """A writer's handle on an existing orchestrator (MemoryNotFound when it has none)."""
    databases = Databases(cli.settings)
    odb = databases.open(orchestrator_id, create=False)
    if odb is None:
        raise MemoryNotFound(f"orchestrator {orchestrator_id!r} has no memory.db under "
                             f"{cli.settings.runtime_root(orchestrator_id)}")
    return databases, odb


def _progress_bars() -> Any:
    """A progress callback drawing one bar per part on stderr."""
    bars: dict[str, Any] = {}

    def progress(part: str, done: int, total: int) -> None:
        bar = bars.get(part)
        if bar is None:
            bar = bars[part] = click.progressbar(length=max(total, 1), label=part,
                                                 file=sys.stderr)
            bar.__enter__()
        bar.update(max(0, done - bar.pos))
        if done >= total:
            bar.__exit__(None, None, None)

    return progress


@click.command()
@orch_option
@click.option("--fts", is_flag=True, help="Rebuild the full-text index.")
@click.option("--vectors", is_flag=True, help="Drop every vector and embed again.")
@click.option("--bulletin", is_flag=True, help="Write the bulletin snapshot again.")
@click.option("--ann", "ann_index", is_flag=True,
              help="Make the approximate vector index file (vectors.usearch) again from the "
              "stored vectors (removed below memory.retrieval.ann_threshold vectors); "
              "--vectors does it too.")
@click.option("--from-log", is_flag=True,
              help="Rebuild lost memories themselves, with the same ids, from their snapshots "
                   "on the execution log (memories written from a run's step), then their "
                   "full-text rows and vectors. A memory still stored is verified; one stored "
                   "with other content refuses the rebuild; forgotten ones stay forgotten.")
@click.option("--dry-run", is_flag=True,
              help="With --from-log: report what would be written, write nothing.")
@json_option
@pass_cli
def rebuild(cli: Cli, orchestrator_id: str, fts: bool, vectors: bool, bulletin: bool,
            ann_index: bool, from_log: bool, dry_run: bool, as_json: bool) -> None:
    """Drop derived data and rebuild it from the records (all parts when none is named),
    or rebuild lost memories from the execution log (--from-log).

    Recall answers the same afterwards, ranks included. While vectors are rebuilt, recall
    answers from the vectors already made plus full text.
    """
    if dry_run and not from_log:
        raise click.UsageError("--dry-run goes with --from-log")
    if from_log and (fts or vectors or bulletin or ann_index):
        raise click.UsageError("--from-log rebuilds the memories with their full-text rows "
                               "and vectors: name no other part")
    if from_log:
        _rebuild_from_log(cli, orchestrator_id, dry_run, as_json)
        return
    if not (fts or vectors or bulletin or ann_index):
        fts = vectors = bulletin = True
    settings = cli.settings
    databases, odb = open_writer(cli, orchestrator_id)
    progress = _progress_bars()
    try:
        report = rebuild_parts(
            odb, fts=fts, vectors=vectors,
            bulletin=(lambda: write_bulletin(odb)) if bulletin else None,
            embedder=bulk_embedder(settings.embedding) if vectors or ann_index else None,
            batch_size=settings.embedding.batch_size, progress=progress, ann_index=ann_index)
    finally:
        databases.close_all()
    emit({"ok": True, "orchestratorId": orchestrator_id, **report}, as_json,
         "\n".join(f"{part}: " + ", ".join(f"{k} {v}" for k, v in done.items())
                   for part, done in report.items()))


def _rebuild_from_log(cli: Cli, orchestrator_id: str, dry_run: bool, as_json: bool) -> None:
    settings = cli.settings
    require_orchestrator(settings, orchestrator_id)
    databases, odb = open_writer(cli, orchestrator_id)
    try:
        report = rebuild_from_log(
            odb, embedder=None if dry_run else bulk_embedder(settings.embedding),
            batch_size=settings.embedding.batch_size, dry_run=dry_run,
            progress=None if as_json else _progress_bars())
    except ImportRejected as exc:  # a conflict: the memories it names, as JSON with --json
        fail(exc, as_json)
        return
    finally:
        databases.close_all()
    written = report["written"]
    text = (f"{'would write' if dry_run else 'wrote'} {written['records']} memories "
            f"({written['tombstones']} forgotten), {written['sources']} sources, "
            f"{written['edges']} edges from {report['snapshots']} snapshots on the log; "
            f"{report['verified']} already stored, {report['erased']} erased by a hard "
            f"forget; {report['vectors']} vectors embedded")
    emit({"ok": True, "orchestratorId": orchestrator_id, **report}, as_json, text)


def _targets(cli: Cli, orchestrator_id: str | None, every: bool) -> list[str]:
    if bool(orchestrator_id) == every:
        raise click.UsageError("name one orchestrator with --orch ID, or --all")
    return known_orchestrators(cli.settings) if every else [str(orchestrator_id)]


@click.command()
@orch_option
@click.option("--list", "listing", is_flag=True, help="List the backups instead.")
@json_option
@pass_cli
def backup(cli: Cli, orchestrator_id: str, listing: bool, as_json: bool) -> None:
    """Back up an orchestrator's memory into memory/backups/ (SQLite's online backup API:
    safe while workers write), keeping backup.retention_count of them."""
    settings = cli.settings
    workspace = Workspace.for_orchestrator(settings, orchestrator_id)
    if listing:
        found = [b.to_dict() for b in list_backups(workspace)]
        emit({"orchestratorId": orchestrator_id, "backups": found}, as_json,
             "\n".join(f"{b['taken']}  {b['reason']:<16} {b['bytes']:>10}  {b['path']}"
                       for b in found) or "no backups")
        return
    databases = Databases(settings, readonly=True)
    odb = databases.open(orchestrator_id, create=False)
    if odb is None:
        raise MemoryNotFound(f"orchestrator {orchestrator_id!r} has no memory.db to back up")
    try:
        path = take_backup(odb, "manual")
    finally:
        databases.close_all()
    removed = prune(workspace, settings.backup.retention_count)
    emit({"ok": True, "backup": str(path), "removed": [str(p) for p in removed]}, as_json,
         f"backed up to {path}" + (f"; {len(removed)} old backups removed" if removed else ""))


@click.command()
@orch_option
@click.argument("backup_file", metavar="BACKUP", type=click.Path(dir_okay=False))
@json_option
@pass_cli
def restore(cli: Cli, orchestrator_id: str, backup_file: str, as_json: bool) -> None:
    """Replace an orchestrator's memory with BACKUP (a path, or a file name in
    memory/backups/).

    The current file is backed up first (reason prerestore) when it can be read. The copy
    holds the file's write lock throughout: the shard's worker waits, then sees the
    restored memory. Writes that committed after BACKUP was taken are gone.
    """
    settings = cli.settings
    workspace = Workspace.for_orchestrator(settings, orchestrator_id)
    path = Path(backup_file)
    if not path.exists() and (workspace.backups_dir / backup_file).exists():
        path = workspace.backups_dir / backup_file
    if not path.is_file():
        raise MemoryNotFound(f"no backup {backup_file!r} (nor in {workspace.backups_dir})")
    check_backup(path, orchestrator_id)
    safety = None
    if workspace.db_path.exists():
        databases = Databases(settings, readonly=True)
        try:
            odb = databases.open(orchestrator_id, create=False)
            safety = take_backup(odb, "prerestore") if odb else None
        except OrchmemError as exc:
            click.echo(f"warning: the current file could not be backed up first ({exc})",
                       err=True)
        finally:
            databases.close_all()
    version = restore_backup(workspace, path, settings.worker.busy_timeout_ms)
    cleared = clear_degraded(workspace)
    emit({"ok": True, "restored": str(path), "schemaVersion": version,
          "previous": str(safety) if safety else None, "degradedCleared": cleared}, as_json,
         f"restored {path} (schema {version})"
         + (f"; the previous file is kept as {safety}" if safety else ""))


@click.command()
@click.option("--orch", "orchestrator_id", metavar="ID", help="The orchestratorId.")
@click.option("--all", "every", is_flag=True, help="Every orchestrator under the root.")
@click.option("--to", "to_version", type=click.IntRange(1, SCHEMA_VERSION), metavar="N",
              help=f"Go back down to schema N (1..{SCHEMA_VERSION}), to run an earlier "
                   "release on the files. Stop the workers first; a writer of this "
                   "release migrates the files up again when it opens them.")
@click.option("--force", is_flag=True,
              help="With --to: go down even where the older schema cannot govern what the "
                   "file holds (restricted, confidential, session or project memories).")
@click.option("--dry-run", is_flag=True, help="Only say which steps each one needs.")
@json_option
@pass_cli
def migrate(cli: Cli, orchestrator_id: str | None, every: bool, to_version: int | None,
            force: bool, dry_run: bool, as_json: bool) -> None:
    """Bring memory files up to this release's schema (backup first, one transaction,
    checked). Also clears degraded mode and tries again after a failed migration.
    With --to N, undo the steps above N instead (the same backup, transaction, check);
    below 3 that is refused while memories are restricted, confidential or not global,
    unless --force (their governance is kept for the way back up either way)."""
    report: dict[str, Any] = {}
    for target in _targets(cli, orchestrator_id, every):
        report[target] = (_migrate_one(cli.settings, target, dry_run) if to_version is None
                          else _downgrade_one(cli.settings, target, to_version, dry_run,
                                              force))
    failed = any(r["status"] in ("degraded", "failed", "refused") for r in report.values())
    emit({"ok": not failed, "orchestrators": report}, as_json,
         "\n".join(f"{o}: " + ", ".join(f"{k} {v}" for k, v in r.items())
                   for o, r in report.items()) or "no orchestrators")
    if failed:
        raise SystemExit(1)


def _migrate_one(settings: Settings, target: str, dry_run: bool) -> dict[str, Any]:
    readers = Databases(settings, readonly=True)
    odb = readers.open(target, create=False)
    if odb is None:
        return {"status": "empty"}
    steps = pending(odb)
    version = int(odb.meta("schema_version") or 0)
    readers.close_all()
    if dry_run or not steps:
        return {"status": "would migrate" if steps else "current",
                "schemaVersion": version, "steps": steps}
    workspace = Workspace.for_orchestrator(settings, target)
    clear_degraded(workspace)
    writers = Databases(settings)
    writers.open(target, create=False)
    writers.close_all()
    info = degraded_info(workspace)
    return ({"status": "degraded", **info} if info else
            {"status": "migrated", "fromVersion": version, "steps": steps})


def _downgrade_one(settings: Settings, target: str, to_version: int,
                   dry_run: bool, force: bool) -> dict[str, Any]:
    writers = Databases(settings)
    try:
        odb = writers.open(target, create=False, migrate_up=False)
        if odb is None:
            return {"status": "empty"}
        version = int(odb.meta("schema_version") or 0)
        steps = [s.version for s in reversed(MIGRATIONS) if to_version < s.version <= version]
        if dry_run or not steps:
            return {"status": "would downgrade" if steps else "current",
                    "schemaVersion": version, "steps": steps}
        try:
            downgrade(odb, to_version, force=force)
        except DowngradeRefused as exc:
            return {"status": "refused", "schemaVersion": version, "error": str(exc)}
        except MigrationFailed as exc:
            return {"status": "failed", "schemaVersion": version, "error": str(exc)}
        return {"status": "downgraded", "fromVersion": version, "schemaVersion": to_version,
                "steps": steps}
    finally:
        writers.close_all()


COMMANDS = [rebuild, backup, restore, migrate]
