"""Ranking: RRF and each modifier on hand-made lists; determinism."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchmem.config.memory_settings import RetrievalSettings
from orchmem.models.recall.ranking import (
    Features,
    confidence_factor,
    contradiction_factor,
    fuse,
    importance_factor,
    ranks,
    recency_factor,
    rrf,
)

NOW = datetime(2025, 1, 1, tzinfo=UTC)
PLAIN = RetrievalSettings(importance_weight=0, recency_weight=0, confidence_weight=0,
                          contradiction_penalty=0, rrf_k=60)


def feats(*ids: str, **overrides: Features) -> dict[str, Features]:
    out = {i: Features(i, importance=50, confidence=1.0, created_at=NOW) for i in ids}
    out.update(overrides)
    return out


def test_rrf_sums_reciprocal_ranks_over_lists() -> None:
    fused = rrf([ranks(["a", "b", "c"]), ranks(["c", "a"])], k=60)
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)


def test_a_node_in_only_one_list_still_scores_but_below_one_in_both() -> None:
    fused = rrf([ranks(["only-vector", "both"]), ranks(["both"])], k=60)
    assert fused["only-vector"] == pytest.approx(1 / 61)
    assert fused["both"] > fused["only-vector"]


def test_ranks_are_one_based_and_first_occurrence_wins() -> None:
    assert ranks(["x", "y", "x"]) == {"x": 1, "y": 2}


def test_rrf_rejects_a_non_positive_k() -> None:
    with pytest.raises(ValueError):
        rrf([ranks(["a"])], k=0)


def test_ties_break_on_memory_id() -> None:
    # "b" and "a" each rank 1 in one list: equal scores, so memoryId decides.
    ranked = fuse(["b"], ["a"], feats("a", "b"), PLAIN, NOW, top_n=10)
    assert [r.memory_id for r in ranked] == ["a", "b"]
    assert ranked[0].score == ranked[1].score


def test_fuse_is_deterministic_whatever_the_input_order() -> None:
    ids = [f"m{i:02d}" for i in range(30)]
    features = feats(*ids)
    one = fuse(ids[:20], list(reversed(ids[10:])), features, PLAIN, NOW, top_n=30)
    two = fuse(ids[:20], list(reversed(ids[10:])), dict(reversed(features.items())), PLAIN, NOW,
               top_n=30)
    assert [r.memory_id for r in one] == [r.memory_id for r in two]
    assert len(one) == 30


def test_fuse_reports_each_lists_rank_and_cuts_at_top_n() -> None:
    ranked = fuse(["a", "b"], ["b", "c"], feats("a", "b", "c"), PLAIN, NOW, top_n=2)
    assert [(r.memory_id, r.vector_rank, r.text_rank) for r in ranked] == [
        ("b", 2, 1), ("a", 1, None)]


def test_importance_boost_is_linear_around_50() -> None:
    assert importance_factor(50, 0.2) == 1.0
    assert importance_factor(100, 0.2) == pytest.approx(1.2)
    assert importance_factor(0, 0.2) == pytest.approx(0.8)
    assert importance_factor(100, 0.0) == 1.0


def test_recency_decays_by_half_life_to_a_floor() -> None:
    assert recency_factor(0, 0.4, 30) == pytest.approx(1.0)
    assert recency_factor(30, 0.4, 30) == pytest.approx(0.6 + 0.4 * 0.5)
    assert recency_factor(10_000, 0.4, 30) == pytest.approx(0.6, abs=1e-6)
    assert recency_factor(-5, 0.4, 30) == pytest.approx(1.0)  # future dates are not a bonus


def test_confidence_weighting() -> None:
    assert confidence_factor(1.0, 0.3) == 1.0
    assert confidence_factor(0.0, 0.3) == pytest.approx(0.7)


def test_contradiction_penalty_applies_only_when_contradicted() -> None:
    assert contradiction_factor(True, 0.25) == 0.75
    assert contradiction_factor(False, 0.25) == 1.0


@pytest.mark.parametrize(("field", "low", "high"), [
    ("importance", {"importance": 10}, {"importance": 90}),
    ("confidence", {"confidence": 0.2}, {"confidence": 1.0}),
    ("recency", {"created_at": NOW - timedelta(days=400)}, {"created_at": NOW}),
    ("contradiction", {"contradicted": True}, {"contradicted": False}),
])
def test_each_modifier_reorders_equal_rrf_scores(field: str, low: dict, high: dict) -> None:
    params = RetrievalSettings(rrf_k=60)
    # "a" and "z" tie on RRF (rank 1 in one list each); without the modifier "a" wins on id.
    base = {"importance": 50, "confidence": 1.0, "created_at": NOW, "contradicted": False}
    features = {"a": Features("a", **{**base, **low}), "z": Features("z", **{**base, **high})}
    ranked = fuse(["a"], ["z"], features, params, NOW, top_n=2)
    assert [r.memory_id for r in ranked] == ["z", "a"], field


def test_modifiers_off_leave_pure_rrf() -> None:
    features = feats("a", "b")
    features["a"] = Features("a", importance=100, confidence=0.1, created_at=NOW,
                             contradicted=True)
    ranked = fuse(["a", "b"], ["a", "b"], features, PLAIN, NOW, top_n=2)
    assert ranked[0].score == pytest.approx(2 / 61)
    assert ranked[0].modifiers.product == 1.0
