"""Topics: rules first (the extractor's slots), then deterministic embedding clusters."""

from __future__ import annotations

import random

import numpy as np

from orchmem.models.reflection.topics import Unit, assign, label, rule_topic


def _v(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_narrow_slot_names_the_topic_and_a_broad_one_does_not() -> None:
    assert rule_topic("identity:location") == "subject:identity:location"
    assert rule_topic("fact:billing service now") == "subject:fact:billing service"
    assert rule_topic("allergy") == "subject:allergy"
    assert rule_topic("prefer") is None and rule_topic("decision") is None
    assert rule_topic(None) is None and rule_topic("") is None


def test_slot_memories_share_their_topic_whatever_their_vectors() -> None:
    units = [Unit("m1", "I live in Lisbon", "identity:location", "2026-01-01", _v(1, 0)),
             Unit("m2", "I live in Porto now", "identity:location", "2026-01-02", _v(0, 1))]
    assert assign(units, 0.5) == {"m1": "subject:identity:location",
                                  "m2": "subject:identity:location"}


def test_close_vectors_join_the_first_leader_and_far_ones_start_a_topic() -> None:
    tea = Unit("m1", "The user likes green tea", None, "2026-01-01", _v(1, 0, 0))
    tea2 = Unit("m2", "Green tea every morning", None, "2026-01-02", _v(0.9, 0.1, 0))
    port = Unit("m3", "The service runs on port 8080", None, "2026-01-03", _v(0, 0, 1))
    bare = Unit("m4", "Not embedded yet", None, "2026-01-04", None)
    topics = assign([port, tea2, bare, tea], 0.8)
    assert topics["m1"] == topics["m2"] == label(tea.content, "m1")
    assert topics["m1"].startswith("about:green-tea#")
    assert topics["m3"] != topics["m1"] and topics["m3"].startswith("about:service-runs#")
    assert topics["m4"] is None


def test_the_same_units_in_any_order_give_the_same_topics() -> None:
    rng = np.random.default_rng(7)
    units = [Unit(f"m{i:03d}", f"words {i % 5} topic{i % 3}", None, f"2026-01-{1 + i % 28:02d}",
                  _v(*rng.normal(size=8))) for i in range(60)]
    first = assign(units, 0.3)
    shuffled = list(units)
    random.Random(3).shuffle(shuffled)
    assert assign(shuffled, 0.3) == first
    assert len(set(first.values())) > 1


def test_two_clusters_with_the_same_words_get_different_names() -> None:
    assert label("green tea", "m1") != label("green tea", "m2")
    assert label("the and of", "m1").startswith("about:misc#")
