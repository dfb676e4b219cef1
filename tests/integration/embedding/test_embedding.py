"""The embedder as a library in its host's process: offline, and hands off the environment.

Recall loads the model inside the orchestrator's own process, so loading it must not
change that process's environment. The check runs in a fresh
interpreter: the session's model, and whatever other tests set, must not hide a change.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, os, socket

attempts = []

def refuse(name):
    def method(*args, **kwargs):
        attempts.append(name)
        raise OSError(f"no network: {name}")
    return method

for name in ("connect", "connect_ex", "sendto"):
    setattr(socket.socket, name, refuse(name))
socket.getaddrinfo = refuse("getaddrinfo")
socket.create_connection = refuse("create_connection")

# Importing these sets variables of their own (sklearn, through sentence-transformers:
# KMP_DUPLICATE_LIB_OK, KMP_INIT_AT_FORK; torch's compiler, through transformers:
# TORCHINDUCTOR_CACHE_DIR): the host's libraries, loaded here first, not orchmem's doing.
import sentence_transformers, torch, transformers

from orchmem.config.settings import EmbeddingSettings
from orchmem.models.embedding.embedders import get_embedder

before = dict(os.environ)
embedder = get_embedder(EmbeddingSettings())
vector = embedder.encode(["The user prefers tea to coffee."])[0]
after = dict(os.environ)
print(json.dumps({
    "added": sorted(set(after) - set(before)),
    "removed": sorted(set(before) - set(after)),
    "changed": sorted(k for k in set(before) & set(after) if before[k] != after[k]),
    "network": attempts,
    "version": embedder.version,
    "norm": float((vector ** 2).sum()),
}))
"""

#: Variables that would make the libraries offline (or quiet) on their own: the child
#: runs without them, so only orchmem's own code can keep it offline.
_HUB_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE",
                  "TOKENIZERS_PARALLELISM", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_HOME",
                  "HF_HUB_CACHE", "SENTENCE_TRANSFORMERS_HOME")


def test_loading_the_model_leaves_the_environment_alone_and_needs_no_network(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in _HUB_VARIABLES and not k.startswith("ORCHMEM_")}
    # An empty hub cache: nothing to fall back on if the loader went looking online.
    env.update(HF_HOME=str(tmp_path / "hf-home"), HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["network"] == []
    assert report["version"] == "all-MiniLM-L6-v2:384:norm"
    assert abs(report["norm"] - 1.0) < 1e-4
    assert (report["added"], report["removed"], report["changed"]) == ([], [], [])
