"""The vector search asks its filter about the hits in turns (``vectors._kept``): the
answer is the first ``limit`` passing hits of the window, as when the whole window is
filtered at once, and a window where most pass costs one question about
``limit + KEEP_SLACK`` ids."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from orchmem.models.storage.search.vectors import KEEP_SLACK, VectorHit, _kept

HITS = [VectorHit(f"m-{i:03d}", 1.0 - i / 1000) for i in range(116)]


def _asking(passes: Callable[[int], bool], asked: list[list[str]]
            ) -> Callable[[list[str]], set[str]]:
    def keep(ids: list[str]) -> set[str]:
        asked.append(ids)
        return {m for m in ids if passes(int(m[2:]))}
    return keep


@pytest.mark.parametrize("passes", [
    lambda i: True, lambda i: i % 2 == 0, lambda i: i >= 40, lambda i: i % 7 != 3,
    lambda i: False, lambda i: i in (5, 90, 115)])
@pytest.mark.parametrize("limit", [1, 10, 50, 116, 200])
def test_the_hits_kept_are_those_of_filtering_the_whole_window(
        passes: Callable[[int], bool], limit: int) -> None:
    asked: list[list[str]] = []
    kept = _kept(HITS, _asking(passes, asked), limit)
    assert kept == [h for h in HITS if passes(int(h.memory_id[2:]))][:limit]
    flat = [m for turn in asked for m in turn]
    assert flat == [h.memory_id for h in HITS][:len(flat)]  # each hit asked once, in order


def test_when_every_hit_passes_the_filter_is_asked_once_about_limit_and_slack() -> None:
    asked: list[list[str]] = []
    assert len(_kept(HITS, _asking(lambda i: True, asked), 50)) == 50
    assert [len(turn) for turn in asked] == [50 + KEEP_SLACK]


def test_a_turn_asks_about_what_is_still_missing_and_the_slack() -> None:
    asked: list[list[str]] = []
    _kept(HITS, _asking(lambda i: i >= 40, asked), 50)
    # 66 asked, 26 passed (40..65): 24 missing, so 24 + 16 more, all passing
    assert [len(turn) for turn in asked] == [50 + KEEP_SLACK, 24 + KEEP_SLACK]
