"""Injection by tier through the real worker: ``context_for`` puts the procedural
memories first whatever the query, recalls profile and semantic ones, and adds the
episodic ones only when the router says the question is about what happened (or the
caller asks); each line shows its tier."""

from __future__ import annotations

from orchmem_testing import WorkerProcess

from orchmem.config import Settings
from orchmem.models.embedding.embedders import Embedder
from orchmem.worker import MemoryClient

SOURCE = {"sourceType": "manual", "capturedBy": "user"}


def test_context_injects_by_tier(settings: Settings, worker: WorkerProcess,
                                 embedder: Embedder, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    written = client.write_back(memories=[
        {"type": "Fact", "content": "Answer questions about the pottery studio in short "
         "bullet points", "tier": "procedural", "source": SOURCE},
        {"type": "Preference", "content": "Ana prefers stoneware glazes for the kiln",
         "source": SOURCE},
        {"type": "Fact", "content": "The studio kiln is electric and fires to cone six",
         "source": SOURCE},
        {"type": "Event", "content": "The kiln firing on Tuesday cracked two bowls",
         "source": SOURCE},
    ]).wait(60)
    assert written is not None and written["ok"], written
    procedural, profile, semantic, episodic = written["memoryIds"]
    plain = client.context_for("step", "tell me about the kiln")
    lines = plain.text.splitlines()
    assert lines[0] == "[how to work]" and procedural in lines[1] and "[procedural]" in lines[1]
    assert [m.memory_id for m in plain.always] == [procedural]
    assert set(plain.bundle.memory_ids) == {profile, semantic}
    assert plain.tiers == ("profile", "semantic") and plain.tiers_reason is None
    assert any(semantic in line and "[semantic]" in line for line in lines)
    assert any(profile in line and "[profile]" in line for line in lines)
    # the bulletin may name it; the recalled memories do not
    assert episodic not in plain.text.split("[memories relevant to this step]")[1]
    happened = client.context_for("step", "what happened with the kiln firing?")
    assert happened.tiers_reason == "router: what_happened"
    assert episodic in happened.bundle.memory_ids
    recalled = happened.text.split("[memories relevant to this step]")[1]
    assert any(episodic in line and "[episodic]" in line for line in recalled.splitlines())
    asked = client.context_for("step", "tell me about the kiln", episodic=True)
    assert asked.tiers_reason == "asked" and episodic in asked.bundle.memory_ids
    refused = client.context_for("step", "what happened with the kiln firing?", episodic=False)
    assert episodic not in refused.bundle.memory_ids and refused.tiers_reason is None
    assert procedural not in happened.bundle.memory_ids  # first, never twice
    client.close()
