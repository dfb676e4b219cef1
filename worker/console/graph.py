"""A memory's neighbours one hop out as a small SVG: the memory in the centre, each
neighbour on a circle around it, each edge a line coloured by its type (the colours
are classes of static/console.css) with its type as a label. Every node is a link."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from orchmem.models.core.shapes import MemoryEdge, MemoryNode
from orchmem.worker.console.markup import Safe, join, render

SIZE = 420
CENTRE = SIZE / 2
RADIUS = 150
#: Neighbours drawn at most (the table below the graph lists every edge).
MAX_DRAWN = 16


def _label(text: str, width: int = 22) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _node(memory_id: str, x: float, y: float, text: str, kind: str, centre: bool) -> Safe:
    return render(
        "<a href=\"/console/memories/{id}\" class=\"gnode{c}\" aria-label=\"{kind}: {full}\">"
        "<circle cx=\"{x}\" cy=\"{y}\" r=\"{r}\"></circle>"
        "<text x=\"{x}\" y=\"{ty}\" text-anchor=\"middle\">{t}</text></a>",
        id=memory_id, c=" centre" if centre else "", kind=kind, full=_label(text, 80),
        x=round(x), y=round(y), r=14 if centre else 10, ty=round(y + 28), t=_label(text))


def edge_graph(node: MemoryNode, edges: Sequence[MemoryEdge],
               others: Mapping[str, MemoryNode]) -> Safe:
    """The SVG of ``node`` and its edges to the memories in ``others`` (those the
    reader sees)."""
    around = [e for e in edges if (e.to_memory_id if e.from_memory_id == node.memory_id
                                   else e.from_memory_id) in others][:MAX_DRAWN]
    parts: list[Safe] = []
    labels: list[Safe] = []
    for i, edge in enumerate(around):
        other = edge.to_memory_id if edge.from_memory_id == node.memory_id else edge.from_memory_id
        angle = 2 * math.pi * i / max(1, len(around)) - math.pi / 2
        x, y = CENTRE + RADIUS * math.cos(angle), CENTRE + RADIUS * math.sin(angle)
        kind = edge.edge_type.value
        parts.append(render("<line class=\"edge {k}\" x1=\"{cx}\" y1=\"{cy}\" x2=\"{x}\" "
                            "y2=\"{y}\"></line>", k=kind, cx=round(CENTRE), cy=round(CENTRE),
                            x=round(x), y=round(y)))
        arrow = "→" if edge.from_memory_id == node.memory_id else "←"
        labels.append(render("<text class=\"elabel {k}\" x=\"{x}\" y=\"{y}\" "
                             "text-anchor=\"middle\">{a} {k}</text>", k=kind, a=arrow,
                             x=round((CENTRE + x) / 2), y=round((CENTRE + y) / 2 - 4)))
        labels.append(_node(other, x, y, others[other].content or "(erased)",
                            others[other].type.value, False))
    centre = _node(node.memory_id, CENTRE, CENTRE, node.content or "(erased)",
                   node.type.value, True)
    return render("<svg class=\"graph\" role=\"img\" viewBox=\"0 0 {s} {s}\" width=\"{s}\" "
                  "height=\"{s}\" aria-labelledby=\"graph-title\"><title id=\"graph-title\">"
                  "{n} edges of this memory</title>{lines}{labels}{centre}</svg>",
                  s=SIZE, n=len(around), lines=join(parts), labels=join(labels), centre=centre)
