"""Moving memory in and out: ``export``, ``import``."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from orchmem.config import ImportRejected, MemoryNotFound
from orchmem.config.settings import EmbeddingSettings
from orchmem.models.embedding.device import bulk_embedder, device_for
from orchmem.models.embedding.embedders import DeferredEmbedder, Embedder, predicted_version
from orchmem.models.portability.export import export_jsonl, export_markdown
from orchmem.models.portability.import_files import declared_embedder, read_manifest
from orchmem.models.portability.importer import Progress, import_folder
from orchmem.models.storage.db.database import Databases
from orchmem.worker.cli.common import Cli, emit, fail, json_option, orch_option, pass_cli
from orchmem.worker.cli.governance_options import tier_option


@click.command(name="export")
@orch_option
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write into (created when missing; files in it are replaced).")
@click.option("--include-restricted", is_flag=True,
              help="Also export memories whose sensitivity is Restricted.")
@click.option("--vectors", "include_vectors", is_flag=True,
              help="Also write vectors.jsonl (the stored embeddings): an import with the "
                   "same embedder reuses them instead of embedding again.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "md"]), default="jsonl",
              show_default=True, help="jsonl: records/sources/edges/audit + manifest.toml "
              "(importable); md: memories.md grouped by type, for reading.")
@tier_option
@json_option
@pass_cli
def export(cli: Cli, orchestrator_id: str, out_dir: str, include_restricted: bool,
           include_vectors: bool, fmt: str, as_json: bool, tiers: tuple[str, ...]) -> None:
    """Write one orchestrator's memory to files, from one read-only snapshot.

    The same database always gives byte-identical .jsonl files.
    """
    databases = Databases(cli.settings, readonly=True)
    odb = databases.open(orchestrator_id, create=False)
    if odb is None:
        raise MemoryNotFound(f"orchestrator {orchestrator_id!r} has no memory.db under "
                             f"{cli.settings.runtime_root(orchestrator_id)}")
    try:
        folder = Path(out_dir).resolve()
        if fmt == "md":
            path = export_markdown(odb, folder, include_restricted=include_restricted,
                                   tiers=tiers)
            emit({"ok": True, "file": str(path)}, as_json, f"wrote {path}")
            return
        manifest = export_jsonl(odb, folder, include_restricted=include_restricted,
                                include_vectors=include_vectors, tiers=tiers)
    finally:
        databases.close_all()
    counts = manifest["counts"]
    note = (f", {manifest['restricted_left_out']} restricted left out"
            if manifest["restricted_left_out"] else "")
    emit({"ok": True, "folder": str(folder), **manifest}, as_json,
         f"exported {counts['records']} memories, {counts['sources']} sources, "
         f"{counts['edges']} edges, {counts['audit']} audit events"
         + (f", {counts['vectors']} vectors" if "vectors" in counts else "")
         + f" to {folder}{note}")


@click.command(name="import")
@orch_option
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@click.option("--skip-conflicts", is_flag=True,
              help="Leave out memoryIds stored with other content (reported) and import the "
                   "rest. Default: any conflict imports nothing.")
@click.option("--apply-edits", is_flag=True,
              help="Apply lines of records.jsonl edited since the export as audited edits "
                   "(patch; supersede for content). Default: an edited line imports nothing "
                   "and is named.")
@json_option
@pass_cli
def import_(cli: Cli, orchestrator_id: str, folder: str, skip_conflicts: bool,
            apply_edits: bool, as_json: bool) -> None:
    """Import an export FOLDER into an orchestrator (new, or merging), all or nothing.

    The manifest's hashes are checked first; a bad line (file, line and field named) or a
    conflict imports nothing. Embeddings are computed again, in batches, with progress,
    except those the export's vectors.jsonl holds for this embedder (export --vectors).
    """
    settings = cli.settings
    # The manifest is read before the database opens: a folder for another orchestrator
    # must not leave an empty memory behind for this one.
    read_manifest(Path(folder), orchestrator_id)
    embedder = _import_embedder(settings.embedding, Path(folder))
    databases = Databases(settings)
    odb = databases.open(orchestrator_id)
    assert odb is not None  # a writer's registry creates the file
    try:
        with _embedding_progress() as progress:
            report = import_folder(odb, Path(folder).resolve(), embedder=embedder,
                                   batch_size=settings.embedding.batch_size,
                                   skip_conflicts=skip_conflicts, progress=progress,
                                   apply_edits=apply_edits)
    except ImportRejected as exc:
        if not as_json:  # each line and field it names, then the one-line error
            for error in exc.errors:
                click.echo(f"{error['path']}: {error['message']}", err=True)
        fail(exc, as_json)
        return
    finally:
        databases.close_all()
    written = report["written"]
    lines = [f"imported {written['records']} memories, {written['sources']} sources, "
             f"{written['edges']} edges, {written['audit']} audit events, "
             f"{written['vectors']} vectors ({report['vectorsFromFile']} from the export's "
             f"vectors.jsonl); {report['skipped']} already present"]
    lines += [f"conflict left out: {c['path']}: {c['message']}" for c in report["conflicts"]]
    lines += [f"edit applied: {e['memoryId']} (line {e['line']}): "
              + ", ".join([*(f"patched {f}" for f in e.get("patched", [])),
                           *([f"superseded by {e['supersededBy']}"]
                             if "supersededBy" in e else [])])
              for e in report["edits"]]
    emit({"ok": True, "orchestratorId": orchestrator_id, **report}, as_json, "\n".join(lines))


@contextmanager
def _embedding_progress(every_s: float = 5.0) -> Iterator[Progress]:
    """How the import reports its embedding: a progress bar on a terminal's stderr,
    otherwise a line on stderr at most every ``every_s`` seconds and at the end (a log
    or a pipe gets no bar). Nothing when every vector came from the export."""
    if sys.stderr.isatty():
        with click.progressbar(length=1, label="embedding", file=sys.stderr) as bar:
            def on_tty(done: int, total: int) -> None:
                bar.length = max(total, 1)
                bar.update(done - bar.pos)

            yield on_tty
        return
    last = [time.monotonic()]

    def in_lines(done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - last[0] >= every_s:
            last[0] = now
            click.echo(f"embedded {done} of {total} memories", err=True)

    yield in_lines


def _import_embedder(settings: EmbeddingSettings, folder: Path) -> Embedder:
    """The bulk embedder, loaded only if a memory needs embedding: when the export's
    vectors were made by this model, its version is known without loading it. A device
    error (``cuda`` without a GPU) is raised here, before any file is written."""
    if settings.device == "cuda":
        device_for(settings)
    declared = declared_embedder(folder)
    if declared is not None and predicted_version(settings, declared[1]) == declared[0]:
        return DeferredEmbedder(lambda: bulk_embedder(settings), *declared)
    return bulk_embedder(settings)


COMMANDS = [export, import_]
