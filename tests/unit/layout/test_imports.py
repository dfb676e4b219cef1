"""Import rules (docs/architecture.md#layers): ``worker → tasks → models → config``, nothing
done at import.

Workers fork: a module that opened a database, loaded the model or connected to Redis
when imported would hand the same connection to every child. The first test reads the
source (every ``import``, lazy ones inside functions included); the second imports
every module in a fresh interpreter and watches the file system, the network and the
model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from source_rules import (
    FORBIDDEN,
    PACKAGES,
    PROJECT,
    RUNS_ON_IMPORT,
    imported_names,
    module_name,
    sources,
)


def breaks(name: str, rule: frozenset[str]) -> bool:
    return any(name == root or name.startswith(root + ".") for root in rule)


def test_the_walk_finds_every_package() -> None:
    names = {module_name(p) for p in sources()}
    for package in PACKAGES:
        assert f"orchmem.{package}" in names
    assert "orchmem.models.storage.memories.rows" in names
    assert "orchmem.worker.client.memory_client" in names


def test_imports_point_down_worker_tasks_models_config() -> None:
    wrong = []
    for path in sources():
        rule = FORBIDDEN.get(path.relative_to(PROJECT).parts[0])
        if rule is None:
            continue
        wrong += [f"{path.relative_to(PROJECT)} imports {name}"
                  for name in sorted(imported_names(path)) if breaks(name, rule)]
    assert wrong == []


def test_the_checker_sees_lazy_relative_and_type_only_imports() -> None:
    path = PROJECT / "models" / "sample.py"
    assert imported_names(path, "from .database import OrchestratorDB\n") == {
        "orchmem.models.database", "orchmem.models.database.OrchestratorDB"}
    for wrong in ("def f():\n    from celery import shared_task\n",
                  "from ..worker import client\n",
                  "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import redis\n",
                  "from orchmem import tasks\n"):
        assert any(breaks(n, FORBIDDEN["models"]) for n in imported_names(path, wrong)), wrong


_CHILD = r"""
import json, os, socket, sys

attempts = []

def refuse(name):
    def method(self, *args, **kwargs):
        attempts.append(f"{name}{args!r}")
        raise OSError(f"no {name} at import time")
    return method

for name in ("connect", "connect_ex", "bind", "listen", "sendto"):
    setattr(socket.socket, name, refuse(name))

failed = {}
for module in json.loads(sys.argv[1]):
    try:
        __import__(module)
    except Exception as exc:
        failed[module] = f"{type(exc).__name__}: {exc}"

print(json.dumps({
    "failed": failed,
    "sockets": attempts,
    # Not even imported, so no model can have been loaded.
    "heavy": sorted(m for m in ("torch", "sentence_transformers", "transformers")
                    if m in sys.modules),
}))
"""


def test_importing_every_module_touches_no_file_socket_or_model(tmp_path: Path) -> None:
    modules = sorted({module_name(p) for p in sources()} - RUNS_ON_IMPORT)
    root, home, cwd = (tmp_path / d for d in ("root", "home", "cwd"))
    for folder in (root, home, cwd):
        folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
    env.update(ORCHMEM_ROOT=str(root), HOME=str(home), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(modules)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failed"] == {}
    assert report["sockets"] == []
    assert report["heavy"] == []
    for folder in (root, home, cwd):
        assert list(folder.rglob("*")) == [], folder


@pytest.mark.parametrize("module", sorted(RUNS_ON_IMPORT))
def test_the_modules_left_out_are_entry_points(module: str) -> None:
    path = PROJECT / Path(*module.split(".")[1:]).with_suffix(".py")
    assert path.name == "__main__.py" and path.exists()


_EACH_FIRST = r"""
import json, sys

failed = {}
for module in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "orchmem" or m.startswith("orchmem.")]:
        del sys.modules[loaded]
    try:
        __import__(module)
    except Exception as exc:
        failed[module] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"failed": failed, "count": len(json.loads(sys.argv[1]))}))
"""


def test_every_module_imports_first_with_no_circular_import() -> None:
    """Imported alone, before any other orchmem module: a cycle (database → migrations →
    ... → database) only shows in the order that enters it from the middle."""
    modules = sorted({module_name(p) for p in sources()} - RUNS_ON_IMPORT)
    done = subprocess.run([sys.executable, "-c", _EACH_FIRST, json.dumps(modules)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"failed": {}, "count": len(modules)} and len(modules) > 100


def orchmem_imports(path: Path) -> list[tuple[int, str]]:
    """The ``orchmem.*`` modules ``path`` imports, outside a ``try`` (where a benchmark
    may fall back to an earlier release's module names)."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for n in ast.walk(t)}
    found = []
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
    return [(line, name) for line, name in found
            if name == "orchmem" or name.startswith("orchmem.")]


def test_tests_and_benchmarks_import_modules_that_exist() -> None:
    import importlib.util

    files = sorted([*(PROJECT / "tests").rglob("*.py"), *(PROJECT / "benchmarks").glob("*.py")])
    checked = [(p, line, name) for p in files for line, name in orchmem_imports(p)]
    missing = [f"{p.relative_to(PROJECT)}:{line} {name}" for p, line, name in checked
               if importlib.util.find_spec(name) is None]
    assert len(checked) > 500 and missing == []
