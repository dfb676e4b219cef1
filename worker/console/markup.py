"""HTML built from constant templates with every value escaped.

:class:`Safe` marks text that is already HTML (a rendered fragment); anything else put
into a template by :func:`render` or :func:`esc` is escaped (``&``, ``<``, ``>``, quotes),
so a memory's text always shows as text.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from typing import Any


class Safe(str):
    """A fragment of HTML built by this module (never user text)."""

    __slots__ = ()


def esc(value: object) -> Safe:
    """``value`` as HTML text: a Safe fragment as it is, anything else escaped."""
    if isinstance(value, Safe):
        return value
    if value is None:
        return Safe("")
    return Safe(html.escape(str(value), quote=True))


def render(template: str, **values: object) -> Safe:
    """``template`` (a constant of the code, ``{name}`` fields) with ``values`` escaped."""
    return Safe(template.format(**{k: esc(v) for k, v in values.items()}))


def join(parts: Iterable[object], sep: str = "") -> Safe:
    """Fragments and texts joined, the texts escaped."""
    return Safe(sep.join(esc(p) for p in parts))


def pretty(value: Any) -> Safe:
    """A JSON value as escaped, indented text (for ``<pre>``)."""
    if value is None:
        return Safe("")
    return esc(json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True, default=str))


def table(headers: Iterable[str], rows: Iterable[Iterable[object]],
          caption: str = "") -> Safe:
    """A table; cells are escaped unless Safe."""
    head = join(render("<th scope=\"col\">{h}</th>", h=h) for h in headers)
    body = join(Safe("<tr>" + join(render("<td>{c}</td>", c=c) for c in row) + "</tr>")
                for row in rows)
    cap = render("<caption>{c}</caption>", c=caption) if caption else Safe("")
    return Safe(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def link(href: str, text: object, **attrs: str) -> Safe:
    """``<a href>``: ``href`` is escaped too (it is built from ids and query strings)."""
    extra = join(render(" {k}=\"{v}\"", k=k.replace("_", "-"), v=v) for k, v in attrs.items())
    return Safe(render("<a href=\"{h}\"", h=href) + extra + render(">{t}</a>", t=text))


def hidden(name: str, value: object) -> Safe:
    return render("<input type=\"hidden\" name=\"{n}\" value=\"{v}\">", n=name, v=value)
