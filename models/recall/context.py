"""The prompt block of ``MemoryClient.context_for``: bulletin and recalled memories as text.

A pure formatter over values: it cites every memory and cuts only whole lines, so a
block that had to be shortened never carries half a citation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from orchmem.models.core.shapes import MemoryNode
from orchmem.models.recall.bundle import RecallBundle, SourceRecord


class BulletinText(Protocol):
    """Anything that carries a rendered bulletin (``BulletinResult`` does)."""

    @property
    def text(self) -> str: ...


def render_context(purpose: str, query: str, bulletin: BulletinText, bundle: RecallBundle,
                   max_chars: int, with_sources: bool = False,
                   working: str | None = None, always: Sequence[MemoryNode] = ()) -> str:
    """Bulletin block, then one line per recalled memory, within ``max_chars``.

    Every memory line cites its memoryId and where it came from; ``with_sources`` adds
    up to two full provenance lines (with capture time) per memory. Only whole lines
    are kept, so a cut never splits a citation: the bulletin gets at most half the
    budget when memories follow it. ``working`` (the text of working.md) comes first, as
    its own block, in at most a third of the budget. ``always`` (the always-injected
    tiers' memories, models/recall/injection.py) come before all of it, in at most a
    quarter. Each memory line shows its tier. Returns the text; raises nothing.
    """
    if always:
        block = _whole_lines(["[how to work]", *(_line(m) for m in always)], max_chars // 4,
                             "(more cut to fit)") + "\n\n"
        return block + render_context(purpose, query, bulletin, bundle,
                                      max_chars - len(block), with_sources, working)
    if working:
        block = _whole_lines(["[working memory]", *working.strip().splitlines()],
                             max_chars // 3, "(working memory cut to fit)") + "\n\n"
        return block + render_context(purpose, query, bulletin, bundle,
                                      max_chars - len(block), with_sources)
    title = f"\n\n[memories relevant to this {purpose}]"
    sources = {p.memory_id: p.sources for p in bundle.provenance}
    lines = []
    for item in bundle.nodes:
        m = item.memory
        found = sources.get(m.memory_id, [])
        line = _line(m)
        if with_sources:
            for src in found[:2]:
                line += f"\n    source: {_where(src)} at {src.captured_at}"
        elif found:
            line += f" [from {_where(found[0])}]"
        lines.append(line)
    if not lines:
        lines.append("- (none)")
    more = "- (more memories cut to fit)"
    # Room for the first memory (and a note that more were cut), up to half the budget.
    reserved = min(len(lines[0]) + len(more) + 2, max_chars // 2)
    text = _whole_lines(f"[memory bulletin]\n{bulletin.text}".splitlines(),
                        max_chars - len(title) - reserved, "(bulletin cut to fit)") + title
    return text + _whole_lines(["", *lines], max_chars - len(text), more)


def _line(m: MemoryNode) -> str:
    """One memory: its type, id and tier, then its content on one line."""
    content = " ".join(m.content.split())[:300]
    return f"- ({m.type.value} {m.memory_id}) [{m.tier.value}] {content}"


def _where(src: SourceRecord) -> str:
    where = src.source_path or src.conversation_id or src.workflow_run_id or ""
    step = f" step {src.step_id}" if src.step_id else ""
    return f"{src.source_type.value} {where}{step}".rstrip()


def _whole_lines(lines: list[str], budget: int, marker: str) -> str:
    """``lines`` joined by newlines, whole lines only, within ``budget`` characters; when
    some are left out, ``marker`` says so (if it fits)."""
    out = ""
    for index, line in enumerate(lines):
        piece = line if index == 0 else "\n" + line
        if len(out) + len(piece) > budget:
            return out + ("\n" + marker if len(out) + 1 + len(marker) <= budget else "")
        out += piece
    return out
