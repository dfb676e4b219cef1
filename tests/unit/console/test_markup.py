"""The console's HTML helpers escape every value that is not a fragment they built."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchmem.worker.console.markup import Safe, esc, link, render, table


@given(st.text())
def test_any_text_is_escaped_in_a_template(text: str) -> None:
    out = render("<p>{t}</p>", t=text)
    inner = out[3:-4]
    assert "<" not in inner and ">" not in inner and '"' not in inner
    assert inner == esc(text)


def test_a_script_becomes_text_in_cells_links_and_attributes() -> None:
    evil = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
    html = table(["h"], [[evil]]) + link("/x?q=" + evil, evil)
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_only_fragments_pass_unescaped() -> None:
    assert render("{a}{b}", a=Safe("<b>"), b="<b>") == "<b>&lt;b&gt;"
