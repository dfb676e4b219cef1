"""Checks on a request's JSON before any model sees it: nesting depth and lone surrogates.

Python's JSON decoder recurses once per nested array or object, so a 2 KB body nested a
thousand deep fails deep inside it; :func:`check_json_depth` counts the brackets
outside strings first and refuses more than :data:`MAX_JSON_DEPTH`. JSON may spell a
lone UTF-16 surrogate (``"\\ud800"``), which no UTF-8 text can hold: hashing, storing or
logging it fails later, so :func:`check_plain_strings` refuses it up front, naming where.
"""

from __future__ import annotations

import re
from typing import Any

from orchmem.config import MemoryValidationError

#: Deepest nesting of arrays and objects a request body may have (the deepest model
#: needs fewer than ten levels).
MAX_JSON_DEPTH = 64
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def check_json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise MemoryValidationError when ``text`` nests arrays or objects deeper than
    ``limit`` (brackets inside strings do not count)."""
    depth = 0
    for match in _BRACKETS.finditer(_STRINGS.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            raise MemoryValidationError(
                f"(body): nested deeper than {limit} levels",
                [{"path": "(body)", "message": f"at most {limit} levels of nesting"}])


def check_plain_strings(value: Any) -> None:
    """Raise MemoryValidationError naming the first string (or key) of ``value`` that
    holds a lone surrogate."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                if _SURROGATE.search(key):
                    _refuse(path or "(body)", "a key holds a lone surrogate")
                pending.append((where, child))
        elif isinstance(item, list):
            pending.extend((f"{path}.{i}" if path else str(i), c) for i, c in enumerate(item))
        elif isinstance(item, str) and _SURROGATE.search(item):
            _refuse(path or "(body)", "a lone UTF-16 surrogate is not text")


def _refuse(path: str, message: str) -> None:
    shown = path.encode("unicode_escape").decode("ascii")[:200]
    raise MemoryValidationError(f"{shown}: {message}", [{"path": shown, "message": message}])
