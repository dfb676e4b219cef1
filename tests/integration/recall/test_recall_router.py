"""The router's parts on a real database and the real model: the speaker a question
names, memories that only ask, and a dated question's own list (models/recall/router.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from orchmem_testing import make_settings

from orchmem.config.memory_settings import RetrievalSettings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder
from orchmem.models.recall.router import plan
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases, OrchestratorDB
from orchmem.models.writeback.apply import write_memories

ORCH = "routed"
START = datetime(2022, 7, 1, 12, 0, tzinfo=UTC)
NOW = datetime(2022, 12, 1, tzinfo=UTC)


@pytest.fixture
def databases(tmp_path: Path) -> Databases:
    return Databases(make_settings(tmp_path, ""))


def transcript(odb: OrchestratorDB, embedder: Embedder, turns: list[str],
               start: datetime = START, key: str = "k") -> list[str]:
    """Each turn an Observation of one conversation, a minute apart from ``start``."""
    memories = [validate(MemoryInput, {
        "type": "Observation", "content": text,
        "createdAt": (start + timedelta(minutes=i)).isoformat(),
        "validFrom": (start + timedelta(minutes=i)).isoformat(),
        "source": {"sourceType": "channel_transcript", "capturedBy": "system",
                   "conversationId": f"chat-{key}"}}, workspace=odb.workspace)
        for i, text in enumerate(turns)]
    return [str(m) for m in write_memories(
        odb, key=key, task="t", memories=memories,
        vectors=list(embedder.encode([m.content for m in memories])),
        embedder=embedder.version)["memoryIds"]]


FILLER = ["Joanna: I spent the morning editing the second act of my screenplay.",
          "Nate: My turtles love the new tank, they swim around all day.",
          "Joanna: The film festival sent me an email about the deadline.",
          "Nate: I practised for the gaming tournament until late at night.",
          "Joanna: I went hiking on the ridge trail and watched the sunset.",
          "Nate: I made a batch of coconut ice cream for my neighbours.",
          "Joanna: My writing group meets on Thursdays at the library downtown.",
          "Nate: The tournament final is streamed online next month.",
          "Joanna: I adopted a routine of writing two pages before breakfast.",
          "Nate: I cleaned the turtle tank and changed the filter today.",
          "Joanna: A producer read my script and wants to talk next week.",
          "Nate: I bought a new controller because the old one broke.",
          "Joanna: I baked a dairy-free cake for my brother's birthday.",
          "Nate: My friends and I watched the whole fantasy trilogy again.",
          "Joanna: The library had a display of old film posters.",
          "Nate: I taught two friends how to make vegan ice cream.",
          "Joanna: I rewrote the ending of my screenplay three times.",
          "Nate: My team practised strategies for the tournament all weekend.",
          "Joanna: I found a quiet cafe where I can write all afternoon.",
          "Nate: The turtles got a bigger basking rock this week."]


def score(bundle: Any, memory_id: str) -> float:
    return float(next(n.scores.score for n in bundle.nodes if n.memory.memory_id == memory_id))


def test_a_named_speaker_is_searched_for_by_topic_and_favoured(databases: Databases,
                                                                embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    ids = transcript(odb, embedder, ["Joanna: See ya Nate!", *FILLER,
                                     "Nate: My favourite recipe is a coconut curry with rice."])
    query = "What is Nate's favourite recipe?"
    routed = recall(ORCH, query, databases=databases, now=NOW, route=True)
    assert routed.plan is not None and routed.plan["speakers"] == ["Nate"]
    assert routed.memory_ids[0] == ids[-1]
    # "See ya Nate!" shares only the name: searched without it, it is not found.
    assert ids[0] not in routed.memory_ids
    plain = recall(ORCH, query, databases=databases, now=NOW, route=False)
    assert plain.plan is None and ids[0] in plain.memory_ids


def test_a_name_that_labels_few_memories_stays_in_the_search(databases: Databases,
                                                             embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    transcript(odb, embedder, ["Nate: My favourite recipe is a coconut curry with rice.",
                               "Postgres: the migration to version 15 is finished."])
    routed = recall(ORCH, "What did Nate say about Postgres?", databases=databases, now=NOW,
                    route=True)
    assert routed.plan is not None and routed.plan["names"] == ["Nate", "Postgres"]
    assert routed.plan["speakers"] == []


def test_a_memory_that_only_asks_is_lowered_below_one_that_states(databases: Databases,
                                                                 embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    asks, states = transcript(odb, embedder, [
        "Which database does the billing service use for its invoices?",
        "The billing service keeps its invoices in a Postgres database."])
    query = "Which database does the billing service use for invoices?"
    plain = recall(ORCH, query, databases=databases, now=NOW, route=False)
    routed = recall(ORCH, query, databases=databases, now=NOW, route=True)
    assert plain.memory_ids[0] == asks
    assert routed.memory_ids[0] == states
    assert routed.plan is not None
    assert score(routed, asks) < score(plain, asks) * routed.plan["asksFactor"] * 1.0001


def test_a_dated_question_finds_a_memory_of_its_days_the_searches_missed(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    # In March: what both searches find first (top 1 each, below).
    transcript(odb, embedder, [*FILLER, "Joanna: I would love to travel more, travel is fun.",
                               "Joanna: Where should I travel next? I love to travel."],
               start=datetime(2022, 3, 1, tzinfo=UTC), key="march")
    said_later = transcript(odb, embedder, [
        "Joanna: Last week I travelled on a trip to Woodhaven, a small town."],
        start=datetime(2022, 8, 3, 15, 0, tzinfo=UTC), key="august")[0]
    narrow = RetrievalSettings(top_n=10, top_k_vector=1, top_k_text=1)
    query = "Where did Joanna travel in July 2022?"
    routed = recall(ORCH, query, databases=databases, now=NOW, route=True, params=narrow)
    plain = recall(ORCH, query, databases=databases, now=NOW, route=False, params=narrow)
    assert routed.plan is not None and routed.plan["window"] == ["2022-07-01", "2022-07-31"]
    # Said on 3 August about "last week" (25-31 July): dated inside the window.
    assert said_later in routed.memory_ids
    assert said_later not in plain.memory_ids
    # With the window list off, the router alone does not reach it either.
    off = recall(ORCH, query, databases=databases, now=NOW, params=narrow,
                 route=lambda q, now: replace(plan(q, now), dated_hits=0))
    assert said_later not in off.memory_ids


def test_the_answer_reached_through_a_question_gets_the_named_speakers_favour(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    # Joanna asks; Nate's answer shares no word with the question.
    ids = transcript(odb, embedder, [
        *FILLER, "Joanna: What are the names of your pet turtles?",
        "Nate: Shelly and Crush, they are the sweetest little guys."])
    asks, answer = ids[-2:]
    query = "What are the names of Nate's pet turtles?"
    after = recall(ORCH, query, databases=databases, now=NOW, route=True)
    before = recall(ORCH, query, databases=databases, now=NOW,
                    route=lambda q, now: replace(plan(q, now), favour_after_expansion=False))
    assert after.plan is not None and after.plan["speakers"] == ["Nate"]
    assert after.plan["favourAfterExpansion"] is True
    p = after.plan
    # Joanna's question is the best hit; the answer after it inherits its plain score,
    # then gets Nate's favour of its own and comes first.
    inherited = score(after, asks) / p["asksFactor"] * p["answerShare"]
    assert score(after, answer) == pytest.approx(inherited * (1 + p["speakerBoost"]))
    assert after.memory_ids[0] == answer
    # Favoured first, Nate's turtle turns pushed the question out of the hits expanded:
    # the answer only came as a neighbour of one of them, lower.
    assert score(before, answer) < score(after, answer)
    assert before.memory_ids.index(answer) > 2


def test_a_question_only_about_a_speaker_keeps_the_name(databases: Databases,
                                                        embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    transcript(odb, embedder, FILLER)
    routed = recall(ORCH, "Tell me about Nate", databases=databases, now=NOW, route=True)
    assert routed.plan is not None and routed.plan["speakers"] == []
    assert routed.nodes and routed.nodes[0].memory.content.startswith("Nate: ")


def test_once_a_question_is_answered_the_others_need_only_the_lower_floor(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    # Two conversations, so the neighbour expansion does not carry one to the other.
    votes = transcript(odb, embedder, [
        "Nate: I vote in every election because politics shapes people's lives.",
        *FILLER])[0]
    [activist] = transcript(odb, embedder, [
        "Nate: I joined an activist group that campaigns for equal rights."], key="other")
    query = "What would Nate's political leaning be?"
    routed = recall(ORCH, query, databases=databases, now=NOW, route=True)
    gated_off = recall(ORCH, query, databases=databases, now=NOW,
                       route=lambda q, now: replace(plan(q, now), answered_floor=None))
    assert routed.plan is not None and routed.plan["speakers"] == ["Nate"]
    assert routed.plan["answeredFloor"] == [0.2, 0.1]
    cosine = {n.memory.memory_id: n.scores.vector_cosine for n in routed.nodes}
    # The searched text is "What would political leaning be?": one memory passes the
    # floor (0.3); the activist one shares no word with it and has a lower cosine.
    assert cosine[votes] is not None and cosine[votes] >= 0.3
    assert cosine[activist] is not None and 0.2 <= cosine[activist] < 0.3
    assert votes in gated_off.memory_ids and activist not in gated_off.memory_ids
    assert set(gated_off.memory_ids) < set(routed.memory_ids)


def test_a_question_about_nothing_stored_still_gets_nothing(databases: Databases,
                                                            embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    transcript(odb, embedder, FILLER)
    for query in ("How do BGP route reflectors scale?", "What is the melting point of tungsten?"):
        assert recall(ORCH, query, databases=databases, now=NOW, route=True).nodes == []


def test_a_terse_turn_that_names_a_day_is_not_lowered_for_a_question_about_when(
        databases: Databases, embedder: Embedder) -> None:
    odb = databases.open(ORCH)
    ids = transcript(odb, embedder, [
        *FILLER, "Joanna: Can I come over sometime and watch you play with your turtles?",
        "Nate: Sure! I'll give the turtles a bath before you get here.",
        "Joanna: Alright, see you tomorrow!"])
    tomorrow = ids[-1]
    query = "When did Joanna plan to visit Nate and his turtles?"
    kept = recall(ORCH, query, databases=databases, now=NOW, route=True)
    lowered = recall(ORCH, query, databases=databases, now=NOW,
                     route=lambda q, now: replace(plan(q, now), dated_substance=False))
    assert kept.plan is not None and kept.plan["intent"] == "entity_time"
    assert kept.plan["datedSubstance"] is True and kept.plan["datedBoost"] > 0
    # Terse (3 words after the label) but dated: "tomorrow" is one of its timeRefs.
    assert score(kept, tomorrow) == pytest.approx(score(lowered, tomorrow)
                                                  / kept.plan["terseFactor"])
    assert kept.memory_ids.index(tomorrow) < lowered.memory_ids.index(tomorrow)
    # A question not about when is answered as before.
    what = "What did Joanna plan to do with Nate and his turtles?"
    plain = recall(ORCH, what, databases=databases, now=NOW, route=True)
    off = recall(ORCH, what, databases=databases, now=NOW,
                 route=lambda q, now: replace(plan(q, now), dated_substance=False))
    assert plain.plan is not None and plain.plan["datedBoost"] == 0
    assert [(n.memory.memory_id, n.scores.score) for n in plain.nodes] == [
        (n.memory.memory_id, n.scores.score) for n in off.nodes]
