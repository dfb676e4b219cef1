"""``embedding.device = "cuda"`` on a machine without a GPU: a clear error at start.

The worker and ``orchmem import`` are run for real, as an operator would start them;
each must stop before doing any work, with one line naming the field. On a machine
whose torch sees a GPU there is nothing to refuse, and the tests are skipped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from orchmem_testing import settings_env

from orchmem.worker import MemoryClient

pytestmark = pytest.mark.skipif(torch.cuda.is_available(),
                                reason="this machine has a GPU: cuda is not an error here")

CUDA = {"ORCHMEM_EMBEDDING__DEVICE": "cuda"}


def _orchmem(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchmem.worker", *args], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_a_worker_asked_for_cuda_without_a_gpu_stops_naming_the_field(isolated: Any) -> None:
    settings = isolated(shards=1)
    run = _orchmem(settings_env(settings, CUDA), "worker", "--wait-broker", "1")
    output = run.stdout + run.stderr
    assert run.returncode != 0, output
    assert "embedding.device = 'cuda'" in output and "no CUDA GPU" in output, output
    assert "Traceback" not in output, output


def test_an_import_asked_for_cuda_without_a_gpu_imports_nothing(
        isolated: Any, tmp_path: Path) -> None:
    settings = isolated()
    client = MemoryClient("source", settings, immediate=True)
    client.write_back(memories=[{"type": "Fact", "content": "The boiler is serviced in October"}]
                      ).wait(30)
    out = tmp_path / "export"
    env = settings_env(settings)
    exported = _orchmem(env, "export", "--orch", "source", "--out", str(out), "--vectors")
    assert exported.returncode == 0, exported.stdout + exported.stderr
    other = tmp_path / "other-root"
    run = _orchmem(settings_env(settings, CUDA), "--root", str(other), "import", "--orch",
                   "source", str(out), "--json")
    output = run.stdout + run.stderr
    assert run.returncode != 0, output
    assert "embedding.device" in output and "no CUDA GPU" in output, output
    assert "Traceback" not in output, output
    assert not list(other.rglob("memory.db"))
