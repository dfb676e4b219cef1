"""The Python snippets of README.md and docs/ run as written, and their stated defaults
are the code's.

Each fenced ``python`` block of README.md and of every page under docs/ runs in a fresh
namespace with ``tmp_path`` (a temporary root) and ``memory`` (an in-process client over
it, ``immediate=True``), as the orchestrator's own tests would have them. A block
preceded by the comment ``<!-- snippet needs a running service: … -->`` is skipped, for
the reason it gives: it talks to `orchmem up`'s broker and workers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from orchmem.config import load_settings
from orchmem.models.core.shapes import MemoryInput
from orchmem.worker import MemoryClient
from orchmem.worker.cli.memory import write

PROJECT = Path(__file__).resolve().parents[3]
README = PROJECT / "README.md"
#: README.md, then every page of the documentation site.
PAGES = [README, *sorted((PROJECT / "docs").rglob("*.md"))]
_BLOCK = re.compile(r"(?:<!-- snippet needs a running service: (?P<why>[^>]*?) -->\n)?"
                    r"```python\n(?P<code>.*?)```", re.S)


def _snippets() -> list[Any]:
    found = []
    for page in PAGES:
        text = page.read_text()
        name = page.relative_to(PROJECT).as_posix()
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("code"))
            marks = [pytest.mark.skip(reason=f"needs a running service: {match['why']}")] \
                if match["why"] else []
            found.append(pytest.param(match["code"], id=f"{name}:{line}", marks=marks))
    return found


SNIPPETS = _snippets()


def test_the_snippets_are_found_and_only_the_service_one_is_skipped() -> None:
    assert len(SNIPPETS) >= 4
    assert sum(1 for s in SNIPPETS if s.marks) == 1


@pytest.mark.parametrize("code", SNIPPETS)
def test_a_readme_snippet_runs(code: str, tmp_path: Path, embedder: Any,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    # A snippet that builds its own client finds the temporary root, never ~/.orchmem.
    monkeypatch.setenv("ORCHMEM_ROOT", str(tmp_path))
    settings = load_settings(root=tmp_path)
    namespace = {"tmp_path": tmp_path,
                 "memory": MemoryClient("readme-bot", settings, immediate=True)}
    exec(compile(code, "<README.md or docs/>", "exec"), namespace)


def test_the_stated_confidence_default_is_the_api_and_cli_default() -> None:
    pages = "\n".join(page.read_text() for page in PAGES)
    [stated] = re.findall(r'"confidence": [\d.]+, +# 0-1, default ([\d.]+)', pages)
    option = next(p for p in write.params if p.name == "confidence")
    assert float(stated) == MemoryInput.model_fields["confidence"].default == option.default
