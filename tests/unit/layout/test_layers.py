"""The storage boundary and the size rules, read from the source.

- Only ``models/storage/`` runs SQL on an orchestrator's files (memory.db, outbox.db,
  the manifest): no other module imports the table classes, peewee, playhouse or
  sqlite3, calls ``.sql(``/``execute_sql``/``odb.db``, or holds an SQL statement.
- No function in config/, models/, tasks/ or worker/ is longer than 60 lines.
- Modules split by concept, not by size: a module past ~800 lines is a signal to look
  for a second concept in it, and no package holds more than 15 modules directly (a
  package that grows past that holds a feature waiting to become a package of its own).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from source_rules import PROJECT, imported_names, module_name

LAYERS = ("config", "models", "tasks", "worker")
STORAGE = PROJECT / "models" / "storage"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 800
MAX_PACKAGE_MODULES = 15

#: What only the storage layer may import.
STORAGE_ONLY_IMPORTS = ("orchmem.models.storage.schema.tables", "peewee", "playhouse", "sqlite3")
#: Calls that run SQL (``execute`` only with a statement: a Redis pipeline's
#: ``execute()`` takes none).
SQL_CALLS = frozenset({"sql", "execute_sql", "execute"})
#: A string that is an SQL statement (keywords in capitals, as all SQL here is written),
#: not prose that mentions a word of SQL.
SQL_TEXT = re.compile(
    r"^\s*(SELECT\s.+\sFROM\s|INSERT\s+(OR\s+\w+\s+)?INTO\s|UPDATE\s+\w+\s+SET\s|"
    r"DELETE\s+FROM\s|CREATE\s+(TABLE|INDEX|VIRTUAL|TRIGGER)\s|PRAGMA\s)", re.S)


def layer_sources() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (PROJECT / layer).rglob("*.py"))


def outside_storage() -> list[Path]:
    return [p for p in layer_sources() if STORAGE not in p.parents]


def sql_violations(path: Path, source: str | None = None) -> list[str]:
    """Every way ``path`` reaches past the storage layer, as readable lines."""
    text = path.read_text(encoding="utf-8") if source is None else source
    where = path.relative_to(PROJECT)
    found = [f"{where} imports {name}" for name in sorted(imported_names(path, text))
             if any(name == root or name.startswith(root + ".")
                    for root in STORAGE_ONLY_IMPORTS)]
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in SQL_CALLS \
                and (node.func.attr != "execute" or node.args or node.keywords):
            found.append(f"{where}:{node.lineno} calls .{node.func.attr}(")
        elif isinstance(node, ast.Attribute) and node.attr == "db" \
                and isinstance(node.value, ast.Name) and node.value.id == "odb":
            found.append(f"{where}:{node.lineno} uses odb.db")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and SQL_TEXT.match(node.value):
            found.append(f"{where}:{node.lineno} holds SQL {node.value[:40]!r}")
    return found


def test_only_the_storage_layer_runs_sql_or_imports_the_tables() -> None:
    wrong = [line for path in outside_storage() for line in sql_violations(path)]
    assert wrong == []


def test_the_sql_checker_sees_each_way_past_the_boundary() -> None:
    path = PROJECT / "models" / "sample.py"
    for source in ("from .storage.schema.tables import MemoryRow\n",
                   "from orchmem.models.storage.schema import tables\n",
                   "import peewee\n",
                   "def f(odb):\n    return odb.sql('x')\n",
                   "def f(odb):\n    return odb.db\n",
                   "Q = 'SELECT memory_id FROM memories'\n",
                   "Q = '''\n  DELETE FROM outbox WHERE key = ?'''\n",
                   "def f(db):\n    db.execute_sql('x')\n",
                   "def f(conn, q):\n    conn.execute(q)\n"):
        assert sql_violations(path, source), source
    assert sql_violations(path, "from .storage import memories\n"
                                "MESSAGE = 'select a memory from the list'\n"
                                "def f(pipe):\n    pipe.execute()\n") == []


def function_lengths(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [(f"{module_name(path)}.{node.name}", node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno is not None]


def test_no_function_is_longer_than_60_lines() -> None:
    long = [f"{name}: {lines} lines" for path in layer_sources()
            for name, lines in function_lengths(path) if lines > MAX_FUNCTION_LINES]
    assert long == []


@pytest.mark.parametrize("path", layer_sources(), ids=lambda p: str(p.relative_to(PROJECT)))
def test_no_module_is_longer_than_800_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(PROJECT)}: {lines} lines"


def packages() -> list[Path]:
    return sorted({p.parent for p in layer_sources() if p.name == "__init__.py"})


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(PROJECT)))
def test_no_package_holds_more_than_15_modules(package: Path) -> None:
    modules = [p for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(modules) <= MAX_PACKAGE_MODULES, \
        f"{package.relative_to(PROJECT)}: {len(modules)} modules"


def test_the_package_rule_sees_every_layer() -> None:
    found = {p.relative_to(PROJECT).parts[0] for p in packages()}
    assert found == set(LAYERS) and len(packages()) > 20
