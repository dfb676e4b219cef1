"""An edit naming a memory of this orchestrator that does not exist, through a real
worker and the CLI: ``not_found`` at once, and nothing left waiting."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from orchmem_testing import WorkerProcess, settings_env, wait_until

from orchmem.config import Settings
from orchmem.models.core.shapes import derive_id
from orchmem.models.workspace.memlog import read_log
from orchmem.worker import MemoryClient
from orchmem.worker.cli import main

MANUAL = {"sourceType": "manual", "capturedBy": "user"}
#: Words of the edits' payloads that no answer may repeat.
SECRET = "hush-hush-7781"


def _cli(settings: Settings, *args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(main, [*args, "--json"], env=settings_env(settings))
    return result.exit_code, json.loads(result.output)


def _stored(client: MemoryClient, text: str) -> str:
    done = client.write_back(memories=[{"type": "Fact", "content": text,
                                        "source": MANUAL}]).wait(60)
    assert done and done["ok"], done
    return str(done["memoryIds"][0])


def test_an_edit_of_an_unknown_memory_ends_not_found_at_once(
        settings: Settings, worker: WorkerProcess, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    known = _stored(client, "The greenhouse door sticks in winter")
    made_up = derive_id("m", orch_id, "never written")
    assert worker.log_path is not None
    log_before = len(worker.log_path.read_text())
    handles = {
        "retract": client.retract(made_up, reason=f"wrong {SECRET}"),
        "forget": client.forget(made_up, reason=f"gone {SECRET}"),
        "hard forget": client.forget(made_up, hard=True),
        "supersede": client.supersede(made_up, content=f"The door is fixed {SECRET}"),
        "patch": client.patch(made_up, importance=10, reason=SECRET),
        "invalidate": client.invalidate(made_up, reason=SECRET),
        "link": client.link(known, made_up, "RelatedTo", reason=SECRET)}
    for op, handle in handles.items():
        assert handle.ok, (op, handle.message)
        result = handle.wait(60)
        assert result is not None and result["ok"] is False, (op, result)
        assert result["error"] == "not_found" and made_up in result["message"], (op, result)
        for leak in (SECRET, "MaxRetries", "Error", "kwargs", "orchmem.edit"):
            assert leak not in result["message"], (op, result)
    # At once: no delivery waited for the memory to appear.
    events = [r["event"] for r in read_log(client.databases.workspace(orch_id).log_path)]
    assert "edit_waiting" not in events
    # Each edit has its final receipt: the client waits for none of them.
    assert client.wait_for_writes(timeout=0) == []
    bundle = client.recall("greenhouse door")
    assert bundle.warnings == [] and bundle.memory_ids == [known]
    new_lines = worker.log_path.read_text()[log_before:]
    assert "Traceback" not in new_lines and "MaxRetriesExceededError" not in new_lines
    assert not [line for line in new_lines.splitlines() if "ERROR" in line]


def test_the_cli_forget_of_an_unknown_id_exits_3_and_a_forget_by_id_says_so(
        settings: Settings, worker: WorkerProcess, orch_id: str) -> None:
    client = MemoryClient(orch_id, settings)
    known = _stored(client, "The compost bin is emptied on Fridays")
    made_up = derive_id("m", orch_id, "never written")
    for command in (["forget", made_up], ["retract", made_up, "--reason", "wrong"],
                    ["forget", known, made_up]):
        code, answer = _cli(settings, *command, "--orch", orch_id)
        assert code == 3 and answer["error"] == "not_found", (command, answer)
        assert made_up in answer["message"], (command, answer)
    assert client.get([known])[0].status.value == "active"  # nothing of a refused forget
    code, answer = _cli(settings, "forget", known, "--orch", orch_id)
    assert code == 0 and answer["memoryIds"] == [known], answer
    code, answer = _cli(settings, "forget", _stored(client, "The hose is green"),
                        "--reason", "asked by the gardener", "--orch", orch_id)
    assert code == 0, answer
    forgotten = answer["memoryIds"][0]
    reasons = {}
    for memory_id in (known, forgotten):
        code, history = _cli(settings, "history", memory_id, "--orch", orch_id)
        assert code == 0, history
        last = history["events"][-1]  # a soft forget retracts
        assert (last["op"], last["after"]) == ("retract", {"status": "retracted"}), last
        reasons[memory_id] = last["reason"]
    assert reasons == {known: "forgotten by id", forgotten: "asked by the gardener"}


@pytest.mark.parametrize("op", ["retract", "forget"])
def test_an_edit_waits_for_a_write_of_its_orchestrator_still_in_flight(
        settings: Settings, worker: WorkerProcess, orch_id: str, op: str) -> None:
    """A write-back recorded in the outbox and not applied yet (lost on its way, say)
    may create the memory an edit names: the edit waits for it, and applies once it
    lands."""
    from orchmem.models.storage.delivery.outbox import Outbox
    from orchmem.tasks.publish import resend, send_envelope
    from orchmem.tasks.writeback import WRITEBACK

    client = MemoryClient(orch_id, settings)
    _stored(client, "The rain barrel holds two hundred litres")
    key = f"late-{op}"
    payload = {"memories": [{"type": "Fact", "content": "The shed roof leaks",
                             "source": MANUAL}], "idempotencyKey": key}
    outbox = Outbox(client.databases.workspace(orch_id).outbox_path)
    outbox.record(key, WRITEBACK, payload)  # recorded, not published yet
    late = derive_id("m", orch_id, key, 0)
    handle = (client.retract(late, reason="wrong") if op == "retract"
              else client.forget(late))
    assert handle.ok
    log_path = client.databases.workspace(orch_id).log_path
    # The edit waits while the write is in flight.
    wait_until(lambda: any(r["event"] == "edit_waiting" for r in read_log(log_path)), 60,
               message="the edit waiting for its memory")
    send_envelope(client.app, resend(orch_id, WRITEBACK, payload))
    result = handle.wait(60)
    assert result is not None and result["ok"], result
    assert client.get([late])[0].status.value == "retracted"
