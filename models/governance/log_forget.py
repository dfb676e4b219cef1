"""What a hard forget does to the execution log and its episodes.

The log keeps the bounded texts a run chose to keep (prompts, responses, tool outputs)
and episodes keep sentences copied from them, so a memory's words can outlive its
erasure there. A hard forget of a memory therefore also:

1. erases the text and data of every log event its provenance cites (the events of
   the run and step its sources name; the row, its digest and times stay, marked
   redacted: models/storage/execlog/redaction.py);
2. rebuilds the episode of each run whose events lost their texts, and of each
   episode that linked the memory, from the redacted log, then replaces any of the
   memory's content words still in its title or summary by ``[…]`` (they came from
   events the provenance does not cite, e.g. the run's outcome);
3. does the same word replacement in every other episode that quotes the memory
   (its title and summary hold all of the memory's content words);
4. merges ``episode_fts`` (``optimize``) so no index segment keeps the old tokens.

A hard ``forget_where`` by workflow run or conversation also redacts every event of
that run (of every run of that conversation) and rebuilds their episodes, whether or
not a memory matched. Content words are the memory's word tokens without the
function words of :data:`textquery.STOPWORDS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from orchmem.models.execlog.archive import redact_archives
from orchmem.models.execlog.episodes import project_run
from orchmem.models.language.textquery import STOPWORDS
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.execlog import redaction
from orchmem.models.storage.execlog.entries import has_log
from orchmem.models.storage.search.fts import match_expression

_WORD = re.compile(r"\w+")
ERASED = "[…]"


def content_words(*texts: str | None) -> set[str]:
    """The casefolded words of ``texts`` that are not function words."""
    words = {w.casefold() for text in texts if text for w in _WORD.findall(text)}
    return {w for w in words if w not in STOPWORDS}


def without_words(text: str, words: set[str]) -> str:
    """``text`` with each of ``words`` (casefolded) replaced by ``[…]``."""
    return _WORD.sub(lambda m: ERASED if m.group().casefold() in words else m.group(), text)


def forget_memory(odb: OrchestratorDB, memory_id: str, cited: Sequence[int],
                  words: set[str], now: str) -> dict[str, int]:
    """Erase ``memory_id``'s words from the log and the episodes (inside the hard
    forget's transaction, after ``erase``); ``cited`` are the seqs its provenance cited
    (read before its sources went). Returns ``{"events": n, "episodes": m}``: events
    redacted, episodes rewritten."""
    if not has_log(odb):
        return {"events": 0, "episodes": 0}
    events, runs = redaction.redact_events(odb, cited, now, "forget_hard")
    linked = list(dict.fromkeys([*runs, *redaction.runs_of_memory(odb, memory_id)]))
    quoting = [r for r in _quoting(odb, words) if r not in linked]
    rewritten = _rebuild(odb, linked, words, now) + _replace(odb, quoting, words, now)
    if events or rewritten:
        redaction.merge_episode_index(odb)
    return {"events": events, "episodes": rewritten}


def forget_runs(odb: OrchestratorDB, run_id: str | None, conversation_id: str | None,
                now: str) -> dict[str, int]:
    """Redact every event of the run ``run_id`` and of every run of ``conversation_id``
    and rebuild their episodes (inside a write transaction). Returns ``{"events": n,
    "episodes": m}``."""
    if not has_log(odb) or (run_id is None and conversation_id is None):
        return {"events": 0, "episodes": 0}
    runs = redaction.runs_selected(odb, run_id, conversation_id)
    events, touched = redaction.redact_events(
        odb, redaction.events_of_runs(odb, runs), now, "forget_where")
    rebuilt = _rebuild(odb, touched, set(), now)
    if events or rebuilt:
        redaction.merge_episode_index(odb)
    return {"events": events, "episodes": rebuilt}


def forget_archived_runs(odb: OrchestratorDB, run_id: str | None,
                         conversation_id: str | None) -> int:
    """Erase the texts of the archived events (models/execlog/archive.py) of the run
    ``run_id`` and of every run of ``conversation_id``; returns how many."""
    if not has_log(odb) or (run_id is None and conversation_id is None):
        return 0
    runs = set(redaction.runs_selected(odb, run_id, conversation_id))
    return redact_archives(odb, runs, set(), "forget_where") if runs else 0


def _quoting(odb: OrchestratorDB, words: set[str]) -> list[str]:
    if not words:
        return []
    return redaction.episodes_matching(odb, match_expression(sorted(words), "AND"))


def _rebuild(odb: OrchestratorDB, run_ids: Sequence[str], words: set[str], now: str) -> int:
    projected = redaction.projected_runs(odb, run_ids)
    for run_id in projected:
        project_run(odb, run_id, now)
    _replace(odb, projected, words, now)
    return len(projected)


def _replace(odb: OrchestratorDB, run_ids: Iterable[str], words: set[str], now: str) -> int:
    changed = 0
    if not words:
        return 0
    for run_id, title, summary in redaction.episode_texts(odb, list(run_ids)):
        new_title, new_summary = without_words(title, words), without_words(summary, words)
        if (new_title, new_summary) != (title, summary):
            redaction.rewrite_episode(odb, run_id, new_title, new_summary, now)
            changed += 1
    return changed
