"""docs/operations/tracing.md lists every span and metric name of
models/telemetry/names.py, and no other; every metric name has an instrument."""

from __future__ import annotations

import re
from pathlib import Path

from orchmem.models.telemetry import meters, names

DOC = Path(__file__).resolve().parents[3] / "docs" / "operations" / "tracing.md"


def _table(section: str) -> set[str]:
    text = DOC.read_text("utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return {match.group(1) for match in re.finditer(r"^\| `([^`]+)`", body, re.MULTILINE)}


def _constants(prefix: str) -> set[str]:
    return {value for key, value in vars(names).items()
            if key.startswith(prefix) and isinstance(value, str)}


def test_the_docs_list_every_span_name_and_no_other() -> None:
    assert _table("Span names") == _constants("SPAN_")


def test_the_docs_list_every_metric_name_and_no_other() -> None:
    assert _table("Metrics") == _constants("M_")


def test_every_metric_name_has_one_instrument() -> None:
    assert set(meters.INSTRUMENTS) == _constants("M_")


def test_task_span_names_are_made_from_their_template() -> None:
    assert names.task_span(names.SPAN_BATCH, "orchmem.writeback") == \
        "process orchmem.writeback batch"
