"""Reading orchmem's own source: module names and what each module imports."""

from __future__ import annotations

import ast
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
PACKAGES = ("config", "models", "tasks", "worker", "examples")
#: ``python -m orchmem.worker`` runs the CLI when imported: that is its job.
RUNS_ON_IMPORT = frozenset({"orchmem.worker.__main__"})

#: What each package must never import (orchmem packages, and third-party roots).
FORBIDDEN: dict[str, frozenset[str]] = {
    "config": frozenset({"orchmem.models", "orchmem.tasks", "orchmem.worker",
                         "orchmem.examples", "celery", "kombu", "redis"}),
    "models": frozenset({"orchmem.tasks", "orchmem.worker", "orchmem.examples", "celery",
                         "kombu", "redis"}),
    "tasks": frozenset({"orchmem.worker", "orchmem.examples"}),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["orchmem", *parts])


def sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (PROJECT / package).rglob("*.py"))


def imported_names(path: Path, source: str | None = None) -> set[str]:
    """Absolute names of every module ``path`` imports, relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    text = path.read_text(encoding="utf-8") if source is None else source
    found: set[str] = set()
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.add(target)
            # ``from orchmem import models`` imports orchmem.models.
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found
