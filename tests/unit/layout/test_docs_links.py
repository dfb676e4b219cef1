"""Every ``docs/<page>.md#anchor`` the repository names points at a page and a heading.

Code comments and Markdown files (README.md, CHANGES.md, …) refer to the documentation
site by path, ``docs/concepts/recall.md#the-relevance-floor``. This test finds each such
reference in the repository's ``.py`` and ``.md`` files and checks that the page exists
and, when an anchor is given, that one of its headings has that anchor. Anchors follow
the rule of the site's builder (mkdocs with Python-Markdown's ``toc``): the heading's
text, ASCII only, lowercase, punctuation dropped, spaces and hyphens to one hyphen, a
second heading of the same anchor suffixed ``_1``. Links between the pages themselves
are checked by ``mkdocs build --strict``.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[3]
DOCS = PROJECT / "docs"

#: Folders that hold no source of the repository (environments, caches, build output).
SKIPPED_DIRS = {"site", "build", "dist", "node_modules", "__pycache__"}

#: ``docs/<path>.md`` with an optional ``#anchor``, not preceded by another path part.
REFERENCE = re.compile(r"(?<![\w./-])docs/((?:[\w.-]+/)*[\w.-]+\.md)(?:#([\w-]+))?")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_ATTR_ID = re.compile(r"\s*\{[^}]*#([\w-]+)[^}]*\}\s*$")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def slug(text: str) -> str:
    """The anchor Python-Markdown's ``toc`` gives a heading of this (plain) text."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    kept = re.sub(r"[^\w\s-]", "", ascii_text).strip().lower()
    return re.sub(r"[-\s]+", "-", kept)


def heading_text(raw: str) -> str:
    """A heading's text as rendered: links to their text, code and emphasis marks dropped."""
    return _LINK.sub(r"\1", raw).replace("`", "").replace("*", "")


def anchors(page: Path) -> list[str]:
    """The anchors of a page's headings, in order, outside fenced code blocks."""
    found: list[str] = []
    seen: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match is None:
            continue
        raw = match.group(2)
        explicit = _ATTR_ID.search(raw)
        anchor = explicit.group(1) if explicit else slug(heading_text(raw))
        unique, n = anchor, 0
        while unique in seen:
            n += 1
            unique = f"{anchor}_{n}"
        seen.add(unique)
        found.append(unique)
    return found


def repository_files() -> Iterator[Path]:
    """The repository's ``.py`` and ``.md`` files, hidden and build folders left out."""
    for folder, dirs, files in os.walk(PROJECT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS
                   and not d.endswith(".egg-info")]
        for name in files:
            if name.endswith((".py", ".md")):
                yield Path(folder) / name


def references() -> list[tuple[str, str, str | None]]:
    """(where, page, anchor) for every ``docs/…md`` reference in the repository."""
    found = []
    for path in sorted(repository_files()):
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in REFERENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(PROJECT).as_posix()}:{line}"
            found.append((where, match.group(1), match.group(2)))
    return found


def test_every_docs_reference_names_a_page_and_one_of_its_headings() -> None:
    broken = []
    for where, page, anchor in references():
        target = DOCS / page
        if not target.is_file():
            broken.append(f"{where}: docs/{page} does not exist")
        elif anchor is not None and anchor not in anchors(target):
            broken.append(f"{where}: docs/{page} has no heading with anchor #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_readme_links_to_the_documentation_site() -> None:
    # The check above would pass on a repository that names no page at all.
    pages = {page for where, page, _ in references() if where.startswith("README.md:")}
    assert {"guide/client.md", "architecture.md", "performance.md"} <= pages


def test_the_checker_finds_references_and_refuses_missing_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n## Time, as of, latest state\n\n```toml\n# not a heading\n"
                    "```\n\n### Why `rrf_k` is 10\n\n## Overlap\n\n## Overlap\n")
    assert anchors(page) == ["a-page", "time-as-of-latest-state", "why-rrf_k-is-10",
                             "overlap", "overlap_1"]
    text = "see docs/concepts/recall.md#overlap, not mydocs/x.md or ../docs/y.md"
    assert [m.groups() for m in REFERENCE.finditer(text)] == [("concepts/recall.md",
                                                               "overlap")]


def test_the_anchor_rule_is_the_one_the_site_is_built_with() -> None:
    # The site's build installs Markdown (the `docs` extra); compare with its own ids.
    markdown = pytest.importorskip("markdown")
    for page in sorted(DOCS.rglob("*.md")):
        md = markdown.Markdown(extensions=["toc", "attr_list", "tables", "fenced_code"])
        md.convert(page.read_text(encoding="utf-8"))
        built = [entry["id"] for entry in _flatten(md.toc_tokens)]
        assert anchors(page) == built, page.relative_to(PROJECT).as_posix()


def _flatten(tokens: list[dict[str, object]]) -> Iterator[dict[str, object]]:
    """Every entry of a ``toc_tokens`` tree, depth first (document order)."""
    for token in tokens:
        yield token
        children = token.get("children")
        if isinstance(children, list):
            yield from _flatten(children)
