"""A write-back and recalls in a process of their own, with telemetry on or off: the
SDK is set up once per process, so what it loads and how it exports is seen there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from orchmem_testing import free_port

#: The repository's root (config/, models/, tasks/, worker/ below it).
PROJECT = Path(__file__).resolve().parents[2]

PROBE = r'''
import logging, os, sys, traceback

# Who imports OpenTelemetry: the file of the innermost frame that is not the import
# machinery, for every opentelemetry module imported. (redis-py imports the SDK itself
# when it is installed: redis/observability/providers.py.)
importers = set()

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            frames = [f.filename for f in traceback.extract_stack()[:-1]
                      if not f.filename.startswith("<frozen")]
            importers.add(frames[-1])
        return None

sys.meta_path.insert(0, Watch())
logging.basicConfig(level=logging.WARNING)
from orchmem.config import load_settings
from orchmem.worker import MemoryClient

settings = load_settings(environ={}, root=sys.argv[1], telemetry={
    "enabled": sys.argv[2] == "on", "max_queue_size": 16, "export_timeout_s": 1})
client = MemoryClient("otel-probe", settings, immediate=True)
result = client.write_back(memories=[{"type": "Fact", "content": "The probe is stored"}]).wait(60)
assert result is not None and result["ok"], result
for _ in range(10):
    bundle = client.recall("where is the probe")
print("wrote ok, recalled", len(bundle.nodes))
print("sdk loaded:", any(m.startswith("opentelemetry.sdk") for m in sys.modules))
# orchmem's folders wherever this interpreter imports them from (the checkout, or
# site-packages after a plain `pip install .`).
import orchmem.config, orchmem.models, orchmem.tasks
ORCHMEM = tuple(os.path.dirname(m.__file__) + os.sep for m in (
    orchmem.config, orchmem.models, orchmem.tasks, sys.modules["orchmem.worker"]))
print("orchmem imported otel from:", sorted(f for f in importers if f.startswith(ORCHMEM)))
'''


def run_probe(root: Path, telemetry: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run :data:`PROBE` with telemetry ``"on"`` or ``"off"`` and ``env`` added."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("ORCHMEM_", "OTEL_"))}
    return subprocess.run([sys.executable, "-c", PROBE, str(root), telemetry, str(PROJECT)],
                          env={**clean, **env}, capture_output=True, text=True, timeout=300)


def run_with_dead_collector(root: Path) -> subprocess.CompletedProcess[str]:
    """Telemetry on, spans sent to a port where nothing listens."""
    return run_probe(root, "on", {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "OTEL_BSP_SCHEDULE_DELAY": "60000"})
