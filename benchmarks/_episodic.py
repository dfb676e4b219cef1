"""Episodic capture on LoCoMo: what ``benchmarks/locomo.py --episodic-capture`` adds.

A LoCoMo session is a dialogue of two people; each exchange (a turn of the session's
first speaker and the other's reply, as an orchestrator's transcript write-back of one
turn would hold them) gets the summary that ``memory.writeback.episodic_summary`` stores
(models/writeback/episodic.py, the speakers' names as the sides' labels): an Event of
tier episodic, dated at its first turn, each turn of the exchange linked to it by a
``PartOf`` edge, as a write-back links its statements. The turns themselves stay the
Observations the benchmark stores without capture.

A summary found in the top k counts the turns it quotes (a turn is quoted when one of
its sentences, or the start of one cut with "…", is in the summary), as a crystal does
with ``--crystals``; ``strict`` figures count only the turns themselves.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from locomo import session_date

from orchmem.models.core.shapes import EdgeInput, EdgeType, MemoryInput, validate
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.writeback.apply import write_memories
from orchmem.models.writeback.episodic import ELLIPSIS, summarize_exchange
from orchmem.models.writeback.extraction import Message, split_sentences

#: memory.writeback.episodic_summary_chars's default.
SUMMARY_CHARS = 400


def exchanges(turns: list[dict[str, Any]], first: str) -> list[list[dict[str, Any]]]:
    """The session's turns in exchanges: a new one at each turn of ``first`` (the
    session's first speaker) that follows the other's turn."""
    out: list[list[dict[str, Any]]] = []
    for turn in turns:
        if not out or (turn["speaker"] == first and out[-1][-1]["speaker"] != first):
            out.append([])
        out[-1].append(turn)
    return out


def _quotes(summary: str, text: str) -> bool:
    flat = " ".join(summary.split())
    for sentence in split_sentences(text):
        sentence = " ".join(sentence.split())
        if sentence and sentence in flat:
            return True
    cut = [part.rstrip(ELLIPSIS) for part in re.split(r"\n", summary) if part.endswith(ELLIPSIS)]
    return any(" ".join(c.split(": ", 1)[-1].split()) in " ".join(text.split()) for c in cut)


def capture_conversation(odb: OrchestratorDB, sample: dict[str, Any], embedder: Any,
                         mapping: dict[str, set[str]]) -> dict[str, set[str]]:
    """Store the summaries of the conversation's exchanges, linked to their turns;
    returns summary memoryId -> the dia_ids of the turns it quotes."""
    conv = sample["conversation"]
    turn_ids = {d: m for m, ids in mapping.items() for d in ids}
    memories: list[MemoryInput] = []
    edges: list[EdgeInput] = []
    quoted: list[set[str]] = []
    sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    for n in sessions:
        turns = conv[f"session_{n}"]
        if not turns:
            continue
        when = session_date(conv[f"session_{n}_date_time"])
        first = turns[0]["speaker"]
        other = next((t["speaker"] for t in turns if t["speaker"] != first), "assistant")
        offset = 0
        for exchange in exchanges(turns, first):
            said = [Message("user" if t["speaker"] == first else "assistant", t["text"])
                    for t in exchange]
            content = summarize_exchange(said, SUMMARY_CHARS,
                                         labels={"user": first, "assistant": other})
            at = (when + timedelta(seconds=offset)).isoformat()
            offset += len(exchange)
            if content is None:
                continue
            key = f"exchange-{len(memories)}"
            memories.append(validate(MemoryInput, {
                "type": "Event", "tier": "episodic", "content": content, "importance": 40,
                "confidence": 0.8, "createdAt": at, "validFrom": at, "key": key,
                "source": {"sourceType": "channel_transcript", "capturedBy": "extractor",
                           "conversationId": f"{sample['sample_id']}-session-{n}"}},
                workspace=odb.workspace))
            quoted.append({t["dia_id"] for t in exchange if _quotes(content, t["text"])})
            edges += [EdgeInput(from_memory_id=turn_ids[t["dia_id"]], to_memory_id=key,
                                edge_type=EdgeType.PART_OF) for t in exchange
                      if t["dia_id"] in turn_ids]
    vectors = list(embedder.encode([m.content for m in memories]))
    result = write_memories(odb, key=f"locomo-{sample['sample_id']}-capture", task="benchmark",
                            memories=memories, edges=edges, vectors=vectors,
                            embedder=embedder.version)
    found: dict[str, set[str]] = {}
    for memory_id, dia_ids in zip(result["memoryIds"], quoted, strict=True):
        found.setdefault(memory_id, set()).update(dia_ids)
    return found
