"""Evidence recall on LoCoMo: FTS only, vector only, hybrid (RRF), with and without modifiers.

Every dialogue turn of a conversation becomes an Observation memory of one
orchestrator per conversation ("<speaker>: <text>", the shared photo's caption
appended; createdAt and validFrom = the session's date, so "yesterday" in a turn
resolves against it; conversationId = the session). For each
question of categories 1-4 the benchmark recalls the top k and counts the evidence
turns found (recall@k: mean fraction of evidence dia_ids; hit@k: at least one).

The data is read from ../shared/bench/data/locomo7.json (see SOURCES.md there); it is
never copied into this repository. The relevance floor is measured both ways: recall@k
with and without it, and the share of empty answers to questions about nothing in the
conversation (benchmarks/data/unrelated_questions.txt, asked of every conversation).

    python benchmarks/locomo.py                       # all modes, default settings
    python benchmarks/locomo.py --conversations 2     # a quick run
    python benchmarks/locomo.py --hybrid-only --crystals   # reflect first: crystals too
    python benchmarks/locomo.py --variants hybrid,router   # some variants only
    python benchmarks/locomo.py --variants hybrid,router --episodic-capture

``--episodic-capture`` adds the summary of every exchange that episodic capture
(``memory.writeback.episodic_summary``) would store, linked to its turns
(benchmarks/_episodic.py); a summary in the top k counts the turns it quotes, and
``strict_by_category`` gives recall@10 counting the turns alone.
The report's ``router_sources_by_category`` counts, per category, the sources the
router's plan says it read (``plan.sources``; a plan without them read the memories
alone), and ``episodic_joins_by_category`` how many questions would bring the episodic
tier into ``context_for`` (models/recall/injection.py, the default settings).

The router's variants (models/recall/router.py): ``router`` is the whole plan; each
``router-no-*`` leaves one part out (an ablation): ``-time`` the question's window
(its boost and its own list) and the favour of dated memories for a question about
when; ``-expansion`` the neighbour expansion; ``-substance`` the lowering of memories
that only ask or are terse; ``-speakers`` the favour of the named speaker and the
search without speakers' names; ``-window-list`` only the window's own list;
``-gate`` the relevance floor as a gate (every candidate held to the full floor).
``router-dated-lowered`` lowers a terse or asking memory that names a day for a
question about when too (an earlier rule of the router).
``router-favours-first`` applies the favours (window, dated, speaker) before the
neighbour expansion, as an earlier router did (a hit's favour handed on to its
neighbours, none of their own).
``router-v1`` is the router's first plan (window, dated favour and expansion only);
benchmarks/HISTORY.md has how each of these compared. ``--skip 4 --conversations 3``
is the held-out check (43, 44, 47).

``--turn-context WORDS`` embeds each turn of fewer than WORDS words (its own text, the
label and a shared photo not counted) as "previous turn\nthis turn" of its session,
the stored content unchanged: a contextual embedding that was measured and not
adopted (it did not hold on the held-out conversations; benchmarks/HISTORY.md). Run it
beside a run without it: the vectors differ, so it is not a variant of one run.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _harness import emit, temp_root

from orchmem.config import load_settings
from orchmem.config.memory_settings import ContextSettings, RetrievalSettings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.recall.injection import injection
from orchmem.models.recall.router import Plan
from orchmem.models.recall.router import plan as route_plan
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases
from orchmem.models.writeback.apply import write_memories

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "data" / "locomo7.json"
UNRELATED = Path(__file__).resolve().parent / "data" / "unrelated_questions.txt"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)


def session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def evidence_ids(raw: list[str], known: set[str]) -> list[str]:
    """Split malformed entries ('D8:6; D9:17') and drop ids that name no turn."""
    ids = []
    for entry in raw:
        for part in re.split(r"[;\s]+", entry):
            if part in known and part not in ids:
                ids.append(part)
    return ids


def load_conversation(odb: Any, sample: dict[str, Any], embedder: Any,
                      context_words: int = 0) -> tuple[dict[str, set[str]], datetime, int]:
    """Store every turn; returns memoryId -> dia_ids, the last session's date and how many
    turns were embedded with their previous turn (``context_words``: see --turn-context)."""
    conv = sample["conversation"]
    turns: list[tuple[str, MemoryInput]] = []
    embedded: list[str] = []
    last = datetime(1970, 1, 1, tzinfo=UTC)
    sessions = sorted(int(k.split("_")[1]) for k in conv
                       if re.fullmatch(r"session_\d+", k))
    for n in sessions:
        when = session_date(conv[f"session_{n}_date_time"])
        last = max(last, when)
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            memory = validate(MemoryInput, {
                "type": "Observation", "content": text, "importance": 50, "confidence": 1.0,
                "createdAt": (when + timedelta(seconds=i)).isoformat(),
                "validFrom": (when + timedelta(seconds=i)).isoformat(),
                "source": {"sourceType": "channel_transcript", "capturedBy": "system",
                           "conversationId": f"{sample['sample_id']}-session-{n}"},
            }, workspace=odb.workspace)
            terse = len(re.findall(r"\w+", turn["text"])) < context_words
            embedded.append(f"{turns[-1][1].content}\n{memory.content}" if terse and i
                            else memory.content)
            turns.append((turn["dia_id"], memory))
    memories = [m for _, m in turns]
    vectors = list(embedder.encode(embedded))
    result = write_memories(odb, key=f"locomo-{sample['sample_id']}", task="benchmark",
                            memories=memories, vectors=vectors, embedder=embedder.version)
    mapping: dict[str, set[str]] = {}
    for (dia_id, _), memory_id in zip(turns, result["memoryIds"], strict=True):
        mapping.setdefault(memory_id, set()).add(dia_id)
    return mapping, last, sum(e != m.content for e, m in zip(embedded, memories, strict=True))


def _planner(**off: Any) -> Callable[[str, datetime], Plan]:
    """The router's plan with some of its parts switched off (an ablation)."""
    return lambda query, now: replace(route_plan(query, now), **off)


_NO_SUBSTANCE: dict[str, Any] = {"asks_factor": 1.0, "terse_factor": 1.0, "dated_substance": False}
_NO_SPEAKERS: dict[str, Any] = {"speaker_boost": 0.0, "speaker_labels": 0}
ROUTES: dict[str, Any] = {
    "router": True,
    "router-no-time": _planner(window_boost=0.0, dated_boost=0.0, dated_hits=0),
    "router-no-expansion": _planner(expand_hits=0),
    "router-no-substance": _planner(**_NO_SUBSTANCE),
    "router-dated-lowered": _planner(dated_substance=False),
    "router-no-speakers": _planner(**_NO_SPEAKERS),
    "router-no-window-list": _planner(dated_hits=0),
    "router-no-gate": _planner(answered_floor=None),
    "router-favours-first": _planner(favour_after_expansion=False),
    "router-v1": _planner(**_NO_SUBSTANCE, **_NO_SPEAKERS, dated_hits=0, answered_floor=None,
                          favour_after_expansion=False),
}


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    data = json.loads(Path(args.data).read_text())[args.skip: args.skip + args.conversations]
    variants: dict[str, tuple[str, RetrievalSettings]] = {}
    base = RetrievalSettings(top_n=max(KS))
    off = base.model_copy(update={"importance_weight": 0.0, "recency_weight": 0.0,
                                  "confidence_weight": 0.0, "contradiction_penalty": 0.0})
    for mode in ("text", "vector", "hybrid"):
        variants[mode] = (mode, base)
    variants["hybrid-no-modifiers"] = ("hybrid", off)
    variants["hybrid-rrf_k-60"] = ("hybrid", base.model_copy(update={"rrf_k": 60}))
    variants["hybrid-no-floor"] = ("hybrid", base.model_copy(update={"min_similarity": 0.0}))
    for name in ROUTES:
        variants[name] = ("hybrid", base)
    if args.variants or args.hybrid_only:
        wanted = ["hybrid"] if args.hybrid_only else args.variants.split(",")
        variants = {v: variants[v] for v in wanted}
    unrelated = [q for q in UNRELATED.read_text().splitlines() if q.strip()]
    empty: dict[str, list[float]] = {v: [] for v in variants}
    totals: dict[str, dict[str, Any]] = {
        v: {"all": {k: [] for k in KS}, "hit": {k: [] for k in KS},
            **{c: {k: [] for k in KS} for c in CATEGORIES.values()}} for v in variants}
    latency: dict[str, list[float]] = {v: [] for v in variants}
    #: Per variant: (conversation, category, recall@10) of each question.
    per_question: dict[str, list[tuple[str, str, float]]] = {v: [] for v in variants}
    intents: dict[str, dict[str, int]] = {c: {} for c in CATEGORIES.values()}
    sources: dict[str, dict[str, int]] = {c: {} for c in CATEGORIES.values()}
    joins: dict[str, int] = dict.fromkeys(CATEGORIES.values(), 0)
    #: Per variant and category: recall@10 counting turns only; summaries in the top 10.
    strict: dict[str, dict[str, list[float]]] = {
        v: {c: [] for c in CATEGORIES.values()} for v in variants}
    summary_slots: dict[str, list[int]] = {v: [] for v in variants}
    summaries = 0
    with temp_root(args.root) as root:
        # Without the query cache every variant embeds its own query, as a recall does
        # in use (with it, the first variant would pay for the others' embedding, and
        # the router, which searches a text of its own, would always pay).
        settings = load_settings(environ={}, root=root, broker_url="", embedding={
            "query_cache_size": 256 if args.query_cache else 0})
        databases = Databases(settings)
        embedder = get_embedder(settings.embedding)
        started = time.time()
        questions = with_context = 0
        for sample in data:
            orch = f"locomo-{sample['sample_id']}"
            odb = databases.open(orch)
            mapping, last, composed = load_conversation(odb, sample, embedder, args.turn_context)
            with_context += composed
            turns_only = dict(mapping)
            if args.episodic_capture:
                from _episodic import capture_conversation
                captured = capture_conversation(odb, sample, embedder, mapping)
                summaries += len(captured)
                mapping.update(captured)
            if args.crystals:  # a crystal finds the turns it quotes (benchmarks/reflect.py)
                from reflect import crystallize_conversation
                mapping.update(crystallize_conversation(odb, embedder, mapping))
            known = {d for ids in mapping.values() for d in ids}
            now = last + timedelta(days=1)
            for qa in sample["qa"]:
                if qa["category"] not in CATEGORIES:
                    continue
                evidence = evidence_ids(qa["evidence"], known)
                if not evidence:
                    continue
                questions += 1
                category = CATEGORIES[qa["category"]]
                if injection(ContextSettings(), qa["question"], None, now).reason:
                    joins[category] += 1
                # The variants take turns going first (with --query-cache, the first one
                # pays for the query's embedding, the others find it in the cache).
                order = list(variants.items())
                shift = questions % len(order)
                for name, (mode, params) in order[shift:] + order[:shift]:
                    bundle = recall(orch, qa["question"], databases=databases, mode=mode,
                                    params=params, now=now,  # type: ignore[arg-type]
                                    route=ROUTES.get(name, False))
                    latency[name].append(bundle.took_ms)
                    if name == "router" and bundle.plan:
                        intents[category][bundle.plan["intent"]] = \
                            intents[category].get(bundle.plan["intent"], 0) + 1
                        for read in bundle.plan.get("sources") or [{"source": "memories"}]:
                            sources[category][read["source"]] = \
                                sources[category].get(read["source"], 0) + 1
                    top10 = bundle.memory_ids[:10]
                    strict[name][category].append(
                        len(_dia_at_k(top10, turns_only, 10) & set(evidence)) / len(evidence))
                    summary_slots[name].append(sum(m not in turns_only for m in top10))
                    for k in KS:
                        top = _dia_at_k(bundle.memory_ids, mapping, k)
                        fraction = len(top & set(evidence)) / len(evidence)
                        totals[name]["all"][k].append(fraction)
                        totals[name]["hit"][k].append(1.0 if top & set(evidence) else 0.0)
                        totals[name][category][k].append(fraction)
                        if k == 10:
                            per_question[name].append((sample["sample_id"], category, fraction))
            for question in unrelated:
                for name, (mode, params) in variants.items():
                    bundle = recall(orch, question, databases=databases, mode=mode,
                                    params=params, now=now,  # type: ignore[arg-type]
                                    route=ROUTES.get(name, False))
                    empty[name].append(0.0 if bundle.nodes else 1.0)
        elapsed = time.time() - started

    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 4) if values else float("nan")

    report: dict[str, Any] = {"benchmark": "locomo_evidence_recall",
                              "conversations": [s["sample_id"] for s in data],
                              "questions": questions, "unrelated_questions": len(unrelated),
                              "seconds": round(elapsed, 1),
                              "turn_context_words": args.turn_context,
                              "turns_embedded_with_context": with_context,
                              "router_intents_by_category": intents,
                              "router_sources_by_category": sources,
                              "episodic_joins_by_category": joins,
                              "episodic_capture": bool(args.episodic_capture),
                              "episodic_summaries": summaries,
                              "results": {}}
    for name in variants:
        entry = {f"recall@{k}": mean(totals[name]["all"][k]) for k in KS}
        entry.update({f"hit@{k}": mean(totals[name]["hit"][k]) for k in KS})
        entry["by_category"] = {c: {f"recall@{k}": mean(totals[name][c][k]) for k in KS}
                                for c in CATEGORIES.values()}
        ordered = sorted(latency[name])
        entry["latency_ms_p50"] = round(ordered[len(ordered) // 2], 2) if ordered else None
        entry["unrelated_empty_share"] = mean(empty[name])
        entry["recall@10_split"] = _split(per_question[name], set(args.held_out.split(",")))
        if args.episodic_capture:
            entry["strict_by_category"] = {c: mean(v) for c, v in strict[name].items()}
            entry["strict_recall@10"] = mean([f for v in strict[name].values() for f in v])
            entry["summaries_in_top10_mean"] = mean([float(n) for n in summary_slots[name]])
        report["results"][name] = entry
    r = report["results"]
    report["settings"] = base.model_dump()
    report["crystals"] = bool(args.crystals)
    if {"hybrid", "text", "vector"} <= set(r):
        report["hybrid_beats_both_at_10"] = (
            r["hybrid"]["recall@10"] > r["text"]["recall@10"]
            and r["hybrid"]["recall@10"] > r["vector"]["recall@10"])
    return report


def _split(rows: list[tuple[str, str, float]], held_out: set[str]) -> dict[str, Any]:
    """recall@10 (overall, by category, questions) of the tuning and held-out parts."""
    out: dict[str, Any] = {}
    for part, inside in (("tuning", False), ("held_out", True)):
        chosen = [(c, f) for conv, c, f in rows if (conv in held_out) == inside]
        if not chosen:
            continue
        by = {c: [f for cat, f in chosen if cat == c] for c in CATEGORIES.values()}
        out[part] = {"questions": len(chosen),
                     "recall@10": round(sum(f for _, f in chosen) / len(chosen), 4),
                     "by_category": {c: round(sum(v) / len(v), 4) for c, v in by.items() if v}}
    return out


def _dia_at_k(memory_ids: list[str], mapping: dict[str, set[str]], k: int) -> set[str]:
    """Dia_ids of the top k memories (a memory stored once for repeated turns counts once)."""
    out: set[str] = set()
    for memory_id in memory_ids[:k]:
        out |= mapping.get(memory_id, set())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--conversations", type=int, default=7)
    parser.add_argument("--root", help="keep the databases here (default: a temp folder)")
    parser.add_argument("--crystals", action="store_true",
                        help="reflect each conversation first, so crystals are recalled too")
    parser.add_argument("--hybrid-only", action="store_true", help="only the hybrid mode")
    parser.add_argument("--variants", help="comma-separated variants (default: all)")
    parser.add_argument("--query-cache", action="store_true",
                        help="keep the query cache on (latencies then favour later variants)")
    parser.add_argument("--held-out", default="conv-43,conv-44,conv-47",
                        help="conversations never looked at while tuning (reported apart)")
    parser.add_argument("--turn-context", type=int, default=0, metavar="WORDS",
                        help="embed a turn of fewer than WORDS words with the turn before it "
                             "in its session (stored content unchanged; measured, not adopted)")
    parser.add_argument("--episodic-capture", action="store_true",
                        help="store the summary of every exchange, as "
                             "memory.writeback.episodic_summary does, linked to its turns")
    parser.add_argument("--skip", type=int, default=0,
                        help="leave out the first N conversations (a held-out check)")
    emit(evaluate(parser.parse_args()))


if __name__ == "__main__":
    main()
