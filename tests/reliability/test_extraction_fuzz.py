"""Hostile input for the extractor: long, repetitive, adversarial lines through
``extract_document``, ``rules_extractor`` and ``subject_of``, and files over the
extraction budget through an ingest scan.

Every example runs under a generous alarm (pathological slowness fails it; speed is not
measured) and its counted work must stay linear in its length. The counts at the end
prove the examples were long and reached the rules that used to be quadratic.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from orchmem_testing import finishes_within, make_settings

from orchmem.models.core.shapes import MemoryType
from orchmem.models.ingest.scan import scan
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.storage.schema.tables import IngestManifestRow
from orchmem.models.workspace.memlog import read_log
from orchmem.models.writeback import extraction
from orchmem.models.writeback.extraction import (
    MAX_SENTENCE_CHARS,
    ExtractionBudget,
    Message,
    extract_document,
    rules_extractor,
    subject_of,
)
from orchmem.models.writeback.extraction_rules import Rule, StartFinder
from orchmem.models.writeback.reconcile import Proposed

EXAMPLES = 200
#: Far above what linear extraction takes on the longest example (well under a
#: second), far below what the quadratic rules took (minutes): see finishes_within.
GUARD_S = 20
#: More than the costliest character needs (177: a three-character sentence per line,
#: see test_extraction.py); a path that reads a long line per position needs thousands.
WORK_PER_CHAR = 250
LONG_CHARS = 20_000

#: What the rules react to: trigger words, the keywords of the rules that used to be
#: quadratic, line markers, nested punctuation. No sentence end unless one is drawn.
TRIGGERS = ["I am ", "I'm ", "my name is ", "decided ", "we decided to ", "- [ ] ", "- ",
            "that's final", ", that's final ", "that's finally ", " is my favorite ",
            " is my all-time favourite", "yesterday ", "went ", "2 days ago ", "worked ",
            "remind me to ", "my goal is ", "the deadline is ", "I don't like ", "I like ",
            "from now on ", "# ", "## Decisions", "((\"'[", "]'\")), ", ",", "  ", "\t", "x",
            "Dana ", "é", ". ", "? ", "yesterday it rained ", "2 days ago Dana worked ",
            "last night x left ", "the ", "our x ", " ends on ", " is hosted on ",
            " is about 5 ", "I am a senior ", "engineer "]
MARKERS = ["", "- ", "* ", "1. ", "- [ ] ", "- [x] ", "# ", "Decision: ", "TODO: ", "   "]
SUBJECT_TYPES = (MemoryType.DECISION, MemoryType.PREFERENCE, MemoryType.EVENT)


@st.composite
def hostile_line(draw: st.DrawFn) -> str:
    unit = "".join(draw(st.lists(st.sampled_from(TRIGGERS), min_size=1, max_size=6)))
    times = draw(st.integers(1, 2 * LONG_CHARS // len(unit)))
    return draw(st.sampled_from(MARKERS)) + unit * times + draw(st.text(max_size=6))


hostile_documents = st.tuples(st.lists(hostile_line(), min_size=1, max_size=3),
                              st.sampled_from(["\n", "\n\n", " ", ""])).map(
    lambda parts: parts[1].join(parts[0]))


@pytest.fixture
def reached(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often the extractor ran each rewritten rule, and how often it found a start."""
    counts: Counter[str] = Counter()

    def counting(name: str, start: StartFinder) -> StartFinder:
        def counted(text: str) -> int | None:
            at = start(text)
            counts[f"{name} ran"] += 1
            counts[f"{name} found"] += at is not None
            return at

        return counted

    def wrapped(index: int, rule: Rule) -> Rule:
        if rule.start is None:
            return rule
        return replace(rule, start=counting(f"{index}:{rule.type.value}", rule.start))

    monkeypatch.setattr(extraction, "RULES",
                        tuple(wrapped(i, r) for i, r in enumerate(extraction.RULES)))
    return counts


def test_hostile_lines_take_linear_work_through_every_entry_point(
        reached: Counter[str]) -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(hostile_documents)
    def run(text: str) -> None:
        budget = ExtractionBudget()
        with finishes_within(GUARD_S, f"extracting {len(text):,} hostile characters"):
            document = extract_document(text, budget)
            as_document = rules_extractor([Message("user", text)], "document")
            transcript = rules_extractor([Message("user", text)], "transcript")
            subjects = [subject_of(t, text) for t in SUBJECT_TYPES]
        assert budget.spent <= WORK_PER_CHAR * (len(text) + 1)
        assert as_document == document
        assert all(c.content for c in document + transcript)
        head = text.strip()[:MAX_SENTENCE_CHARS]
        assert subjects == [subject_of(t, head) for t in SUBJECT_TYPES]
        seen["examples"] += 1
        seen["long"] += len(text) >= LONG_CHARS
        seen["with candidates"] += bool(document)

    run()
    assert seen["examples"] == EXAMPLES
    assert seen["long"] >= EXAMPLES // 5
    assert seen["with candidates"] >= EXAMPLES // 2
    assert len(reached) == 6 and min(reached.values()) >= 10, reached


# ---------------------------------------------------------------------------- ingest

Embed = Callable[[list[Proposed]], tuple[list[Proposed], str | None]]
#: A paragraph of ordinary sentences, about 600 KB: some 40 M characters of rule work,
#: over a second of extraction.
HOSTILE_FILE = "We decided to ship it last week. The team liked it a lot. " * 10_000



def open_odb(root: Path, **ingest: float) -> OrchestratorDB:
    handle = Databases(make_settings(root, "", memory={"ingest": {"min_file_age_s": 0,
                                                                  **ingest}})).open("budget")
    assert handle is not None
    return handle


@pytest.mark.parametrize(("limit", "detail"), [
    ({"extraction_budget_chars": 200_000}, "budget of 200,000 characters"),
    ({"extraction_budget_s": 0.05}, "ran longer than its budget of 0.05 s"),
], ids=["work", "time"])
def test_a_file_over_the_extraction_budget_is_rejected_once_and_never_retried(
        tmp_path: Path, embed: Embed, limit: dict[str, float], detail: str) -> None:
    odb = open_odb(tmp_path / "root", **limit)
    ingest = odb.workspace.ingest_dir
    (ingest / "hostile.md").write_text(HOSTILE_FILE)
    with finishes_within(GUARD_S, "a scan of a file over its budget"):
        first = scan(odb, embed, "test")
    [outcome] = first["files"]
    assert (outcome["file"], outcome["outcome"], outcome["reason"]) == (
        "hostile.md", "rejected", "extraction_budget")
    assert detail in outcome["detail"]
    rejected = odb.workspace.rejected_dir
    assert (rejected / "hostile.md").read_text() == HOSTILE_FILE
    reason = json.loads((rejected / "hostile.md.reason.json").read_text())
    assert (reason["reason"], reason["detail"]) == ("extraction_budget", outcome["detail"])
    assert [r["reason"] for r in read_log(odb.workspace.log_path)
            if r["event"] == "ingest_file"] == ["extraction_budget"]

    again = scan(odb, embed, "test")
    assert (again["files"], again["rejected"]) == ([], 0)
    assert sorted(p.name for p in rejected.iterdir()) == ["hostile.md", "hostile.md.reason.json"]
    sha256 = hashlib.sha256(HOSTILE_FILE.encode()).hexdigest()
    with odb.read():
        rows = [(r.outcome, r.reason, r.moved) for r in
                IngestManifestRow.select().where(IngestManifestRow.sha256 == sha256)]
    assert rows == [("rejected", "extraction_budget", 1)]


def test_a_file_within_the_budget_beside_one_over_it_is_ingested(
        tmp_path: Path, embed: Embed) -> None:
    odb = open_odb(tmp_path / "root", extraction_budget_chars=200_000)
    (odb.workspace.ingest_dir / "hostile.md").write_text(HOSTILE_FILE)
    (odb.workspace.ingest_dir / "notes.md").write_text("I prefer green tea.\n")
    result = scan(odb, embed, "test")
    assert {f["file"]: f.get("reason", f["outcome"]) for f in result["files"]} == {
        "hostile.md": "extraction_budget", "notes.md": "ingested"}
    assert [p.name for p in odb.workspace.processed_dir.iterdir()] == ["notes.md"]
