"""``orchmem ingest --wait`` right after a file is dropped, through a real worker: the
scan waits out the file's age (``min_file_age_s``, at most that long) and takes it,
instead of skipping it as too new."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner
from orchmem_testing import WorkerProcess, settings_env

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.workspace.folders import Workspace
from orchmem.worker.cli.main import main
from orchmem.worker.runtime.app import create_app

ORCH = "dropbox"


def test_ingest_wait_takes_a_file_dropped_just_before(isolated: Any,
                                                      embedder: Embedder) -> None:
    settings = isolated(shards=1, memory={"ingest": {"min_file_age_s": 3}})
    workspace = Workspace.for_orchestrator(settings, ORCH)
    workspace.ensure()
    worker = WorkerProcess(settings).start(create_app(settings))
    try:
        (workspace.ingest_dir / "handover.md").write_text(
            "## Decisions\n- The night shift hands over at six\n")
        result = CliRunner().invoke(main, ["ingest", "--orch", ORCH, "--wait", "--json"],
                                    env=settings_env(settings))
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["ingested"] == 1 and report["skipped"] == 0, report
        assert [f["outcome"] for f in report["files"]] == ["ingested"], report
        assert not (workspace.ingest_dir / "handover.md").exists()
    finally:
        worker.stop()
