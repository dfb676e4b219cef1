"""RowCache.fill (models/storage/search/row_cache.py): the answer holds every id asked, read
once, even when the fill clears the cache for its bound."""

from __future__ import annotations

import pytest

from orchmem.models.storage.search import row_cache


def test_a_fill_reads_only_what_is_missing_and_answers_every_id() -> None:
    cache = row_cache.RowCache("1")
    asked: list[list[str]] = []

    def read(missing: list[str]) -> dict[str, str]:
        asked.append(missing)
        return {m: m.upper() for m in missing}
    assert cache.fill(cache.edges, ["a", "b", "a"], read) == {"a": "A", "b": "B"}
    assert cache.fill(cache.edges, ["b", "c"], read) == {"b": "B", "c": "C"}
    assert asked == [["a", "b"], ["c"]]


def test_a_fill_past_the_bound_still_answers_the_ids_it_held(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(row_cache, "MAX_MEMORIES", 2)
    cache = row_cache.RowCache("1")
    cache.fill(cache.rows, ["a", "b", "c"], lambda missing: dict.fromkeys(missing))
    # Three rows held, past the bound: this fill clears the cache, "a" included.
    assert cache.fill(cache.rows, ["a", "d"], lambda missing: dict.fromkeys(missing)) == {
        "a": None, "d": None}
    assert set(cache.rows) == {"d"}
