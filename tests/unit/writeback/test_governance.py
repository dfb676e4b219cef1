"""Governance values and rules: tiers by type, scope completeness, tags and
metadata bounds, the secret detector, the view's SQL against its Python twin, budgets."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from orchmem.config import MemoryValidationError
from orchmem.config.governance import SECRET_RULES, GovernanceSettings
from orchmem.models.core.governance_fields import TIER_OF_TYPE, Tier, tier_of
from orchmem.models.core.payloads import ChannelTranscript, WorkflowOutput
from orchmem.models.core.shapes import MemoryInput, MemoryType, validate
from orchmem.models.governance.policy_edits import ForgetPolicy, Patch
from orchmem.models.recall.context_budget import count_tokens, within_budget
from orchmem.models.storage.visibility import View, make_view
from orchmem.models.writeback.secret_scores import score
from orchmem.models.writeback.secrets import classify, find_secrets, luhn_ok

SECRETS = Path(__file__).parents[2] / "data" / "secrets"
MANUAL = {"sourceType": "manual", "capturedBy": "user"}


def memory(**fields: Any) -> MemoryInput:
    return validate(MemoryInput, {"type": "Fact", "content": "Some content here",
                                  "source": MANUAL, **fields})


def test_every_type_has_a_default_tier_and_an_explicit_one_wins() -> None:
    assert set(TIER_OF_TYPE) == {t.value for t in MemoryType}
    assert tier_of("Identity", None) == Tier.PROFILE
    assert tier_of("Observation", None) == Tier.EPISODIC
    assert tier_of("Observation", "procedural") == Tier.PROCEDURAL


def test_defaults_and_scope_rules_of_a_memory_input() -> None:
    plain = memory()
    assert (plain.tier, plain.scope.value, plain.sensitivity, plain.tags, plain.metadata) == (
        None, "global", None, [], {})
    with pytest.raises(MemoryValidationError, match="scope session requires a sessionId"):
        memory(scope="session")
    with pytest.raises(MemoryValidationError, match="scope project requires a projectId"):
        memory(scope="project", sessionId="s")
    assert memory(scope="session", sessionId="s").session_id == "s"
    assert memory(tags=["a", "a", "b"]).tags == ["a", "b"]


@pytest.mark.parametrize(("fields", "path"), [
    ({"tier": "Profile"}, "tier"), ({"scope": "GLOBAL"}, "scope"),
    ({"sensitivity": "top-secret"}, "sensitivity"), ({"tags": "a"}, "tags"),
    ({"tags": [""]}, "tags.0"), ({"tags": ["x" * 51]}, "tags.0"),
    ({"metadata": []}, "metadata"), ({"metadata": {"n": float("nan")}}, "metadata"),
    ({"metadata": {"k": "v" * 2100}}, "metadata"),
])
def test_bad_values_name_their_field(fields: dict[str, Any], path: str) -> None:
    with pytest.raises(MemoryValidationError) as caught:
        memory(**fields)
    assert caught.value.errors[0]["path"] == path


def test_a_transcript_session_defaults_to_its_conversation() -> None:
    transcript = validate(ChannelTranscript, {"conversationId": "c1", "scope": "session",
                                              "messages": [{"role": "user", "text": "hi"}]})
    assert transcript.placement("c1") == {"scope": "session", "sessionId": "c1", "tags": []}
    with pytest.raises(MemoryValidationError, match="sessionId"):
        validate(WorkflowOutput, {"workflowRunId": "r", "stepId": "s", "output": "x",
                                  "scope": "session"})


def test_patch_and_forget_policy_models_refuse_what_they_cannot_do() -> None:
    with pytest.raises(MemoryValidationError, match="supersede"):
        validate(Patch, {"op": "patch", "memoryId": "m-1", "content": "new"})
    with pytest.raises(MemoryValidationError, match="at least one"):
        validate(Patch, {"op": "patch", "memoryId": "m-1"})
    with pytest.raises(MemoryValidationError, match="at least one selector"):
        validate(ForgetPolicy, {"op": "forget_policy", "hard": True})
    with pytest.raises(MemoryValidationError) as caught:
        validate(ForgetPolicy, {"op": "forget_policy", "before": "2026-13-01"})
    assert caught.value.errors[0]["path"] == "before"
    policy = validate(ForgetPolicy, {"op": "forget_policy", "before": "2026-02-01"})
    assert policy.selector(None).before == "2026-02-01T00:00:00.000000Z"


def test_luhn() -> None:
    assert luhn_ok("4111111111111111") and luhn_ok("378282246310005")
    assert not luhn_ok("4111111111111112") and not luhn_ok("123")


@pytest.mark.parametrize(("text", "rule"), [
    ("my password is hunter2", "password_stated"),
    ("card 4111-1111-1111-1111", "payment_card"),
    ("key AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
])
def test_each_rule_can_be_switched_off(text: str, rule: str) -> None:
    assert rule in find_secrets(text)
    others = tuple(r for r in SECRET_RULES if r != rule)
    assert find_secrets(text, others) == []
    on = GovernanceSettings()
    off = GovernanceSettings(secret_rules=list(others))
    assert classify(memory(content=text), on).sensitivity is not None
    assert classify(memory(content=text), off).sensitivity is None
    assert classify(memory(content=text), GovernanceSettings(secret_detector=False)) \
        .sensitivity is None


def test_the_detector_never_lowers_an_explicit_sensitivity() -> None:
    marked = memory(content="nothing secret", sensitivity="restricted")
    assert classify(marked, GovernanceSettings()).sensitivity is not None
    assert classify(marked, GovernanceSettings()) is marked


def test_detector_precision_and_recall_on_the_labelled_sets() -> None:
    fitted, held_out = score(SECRETS / "labelled.jsonl"), score(SECRETS / "heldout.jsonl")
    assert fitted["examples"] == 80 and held_out["examples"] == 40
    assert fitted["precision"] >= 0.95 and fitted["recall"] >= 0.95, fitted["misses"]
    assert held_out["precision"] >= 0.9 and held_out["recall"] >= 0.85, held_out["misses"]


def _views() -> list[View]:
    return [View(), View(session_id="s1"), View(project_id="p1"),
            View(session_id="s2", project_id="p1", tags=("t",)),
            View(include_restricted=True)]


def test_the_views_sql_and_python_agree_on_every_combination() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, scope TEXT, session_id TEXT,"
                 " project_id TEXT, sensitivity TEXT, tags TEXT)")
    rows = [(scope, session, project, sensitivity, tags)
            for scope in ("global", "session", "project")
            for session in (None, "s1", "s2") for project in (None, "p1", "p2")
            for sensitivity in ("internal", "restricted") for tags in ("[]", '["t"]')]
    conn.executemany("INSERT INTO memories (scope, session_id, project_id, sensitivity, tags)"
                     " VALUES (?, ?, ?, ?, ?)", rows)
    checked = 0
    for view in _views():
        condition, params = view.sql()
        by_sql = {r[0] for r in conn.execute(
            f"SELECT id FROM memories WHERE {condition}", params)}
        by_python = {i + 1 for i, row in enumerate(rows)
                     if view.sees(*row[:4], json.loads(row[4]))}
        assert by_sql == by_python, view
        checked += len(rows)
    assert checked == 5 * 108


def test_make_view_checks_its_fields() -> None:
    with pytest.raises(MemoryValidationError) as caught:
        make_view(include_restricted=True)
    assert caught.value.errors[0]["path"] == "purpose"
    with pytest.raises(MemoryValidationError, match="sessionId"):
        make_view(session_id="")
    assert make_view("s", None, ["a"]).tags == ("a",)


def test_budgets_cut_whole_lines() -> None:
    lines = ["[Relevant Memory]", "- one two three", "- four five"]
    assert count_tokens(lines[0]) == 4 and count_tokens(lines[1]) == 4
    assert within_budget(lines) == "\n".join(lines)
    assert within_budget(lines, max_chars=len(lines[0]) + 5) == lines[0]
    assert within_budget(lines, max_tokens=8) == "\n".join(lines[:2])
    assert within_budget(lines, max_chars=3) == ""
