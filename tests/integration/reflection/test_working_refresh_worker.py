"""Working memory refreshed when it is injected, through the real worker: an accepted
decision, a forget or enough new memories make working.md stale, and the next
``working_memory()`` / ``context_for(working=True)`` has the worker rebuild it first; a
rebuild that cannot happen leaves the last file in use, with a warning."""

from __future__ import annotations

from typing import Any

from orchmem_testing import make_settings, unique_id

from orchmem.config import Settings
from orchmem.models.bulletin.working import path_of, written
from orchmem.worker import MemoryClient


def memory(content: str, memory_type: str = "Preference") -> dict[str, Any]:
    return {"type": memory_type, "content": content, "importance": 60,
            "source": {"sourceType": "manual", "capturedBy": "extractor"}}


def client_with(settings: Settings, orch_id: str, app: Any, **context: Any) -> MemoryClient:
    ours = settings.model_copy(deep=True)
    for name, value in context.items():
        setattr(ours.memory.context, name, value)
    return MemoryClient(orch_id, ours, app=app)


def write(client: MemoryClient, *contents: str) -> list[str]:
    result = client.write_back(memories=[memory(c) for c in contents]).wait(60)
    assert result is not None and result["ok"], result
    return list(result["memoryIds"])


def watermark_of(client: MemoryClient) -> int:
    odb = client.databases.open(client.orchestrator_id, create=False)
    assert odb is not None
    seen = written(path_of(odb))
    assert seen is not None
    return seen[0]


def test_a_forget_or_enough_new_memories_rebuild_working_md_on_injection(
        settings: Settings, app: Any, worker: Any, orch_id: str) -> None:
    client = client_with(settings, orch_id, app, working_refresh_after=2,
                         working_refresh_timeout_s=30.0)
    tea, coffee = write(client, "The user likes green tea in the morning",
                        "The user avoids coffee after noon")
    reflected = client.reflect().wait(120)
    assert reflected is not None and reflected["ok"] and reflected["working"] is True
    first = client.working_memory(refresh=False) or ""
    assert tea in first and coffee in first
    mark = watermark_of(client)

    [one] = write(client, "The user prefers short answers")  # below the threshold
    assert client.working_memory() == first and watermark_of(client) == mark

    forgot = client.forget(tea).wait(60)
    assert forgot is not None and forgot["ok"], forgot
    context = client.context_for("step", "what does the user drink?", working=True)
    assert context.warnings == []
    block = context.text.split("## Preferences")[1] if "## Preferences" in context.text \
        else context.text
    assert tea not in (client.working_memory(refresh=False) or "") and coffee in block
    assert one in (client.working_memory(refresh=False) or "")  # rebuilt whole
    assert watermark_of(client) > mark
    mark = watermark_of(client)

    two, three = write(client, "The user reads on paper", "The user walks to work")
    text = client.working_memory() or ""
    assert two in text and three in text and watermark_of(client) > mark
    log = client.databases.workspace(orch_id).log_path.read_text()
    assert log.count('"working_refreshed"') >= 2


def test_a_rebuild_that_cannot_happen_keeps_the_last_file_with_a_warning(
        settings: Settings, app: Any, worker: Any, orch_id: str) -> None:
    client = client_with(settings, orch_id, app, working_refresh_timeout_s=30.0)
    [tea] = write(client, "The user likes green tea in the morning")
    assert tea in (client.working_memory() or "")  # missing: built on first use
    before = client.working_memory(refresh=False)
    forgot = client.forget(tea).wait(60)
    assert forgot is not None and forgot["ok"], forgot

    # The same files, but a broker nothing listens on: the rebuild cannot be asked for.
    cut_off = make_settings(settings.root, "redis://127.0.0.1:1/0")
    cut_off.memory.context.working_refresh_timeout_s = 1.0
    offline = MemoryClient(orch_id, cut_off)
    context = offline.context_for("step", "what does the user drink?", working=True)
    [warning] = [w for w in context.warnings if "working memory" in w]
    assert "stale" in warning and "retract" in warning and "using the last" in warning
    assert offline.working_memory(refresh=False) == before
    assert '"working_stale"' in client.databases.workspace(orch_id).log_path.read_text()


def test_an_orchestrator_without_memory_has_no_working_memory(
        settings: Settings, app: Any, worker: Any) -> None:
    client = MemoryClient(unique_id("empty-working"), settings, app=app)
    context = client.context_for("step", "anything?", working=True)
    assert client.working_memory() is None
    assert not [w for w in context.warnings if "working memory" in w]
