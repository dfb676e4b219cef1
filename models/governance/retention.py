"""Retention: which memories the settings' rules say must go, and forgetting
them through the same edit as ``forget_policy`` (audited per memory, idempotent).

Rules (``memory.governance.retention``, config/governance.py) are tried in order; the
first that matches a memory's type, tier and scope decides. ``days`` 0 keeps it for
ever; otherwise it goes once its clock (created, or its session's last activity for a
session-scoped memory) is more than ``days`` old: softly (retracted, only while active)
unless the rule says ``hard`` (erased, whatever its status). A memory already forgotten
the same way is not selected again, so a second run changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from orchmem.config.governance import RetentionRule
from orchmem.models.core.shapes import format_ts
from orchmem.models.governance.edits import apply_edit
from orchmem.models.governance.policy_edits import MAX_POLICY_IDS, ForgetPolicy
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.memories.retention_reads import Kept, kept, record_run


def rule_for(memory: Kept, rules: Sequence[RetentionRule]) -> int | None:
    """The index of the first rule matching ``memory``, or None."""
    for index, rule in enumerate(rules):
        if (rule.type in (None, memory.type) and rule.tier in (None, memory.tier)
                and rule.scope in (None, memory.scope)):
            return index
    return None


@dataclass
class Due:
    """Memory ids to forget, soft and hard, with the rule that chose each group."""

    soft: dict[int, list[str]] = field(default_factory=dict)
    hard: dict[int, list[str]] = field(default_factory=dict)

    def count(self) -> int:
        return sum(map(len, self.soft.values())) + sum(map(len, self.hard.values()))


def due(memories: Sequence[Kept], rules: Sequence[RetentionRule], now: datetime) -> Due:
    """What ``rules`` say must go at ``now`` (pure: no database)."""
    out = Due()
    for memory in memories:
        index = rule_for(memory, rules)
        if index is None or rules[index].days == 0:
            continue
        rule = rules[index]
        if memory.since >= format_ts(now - timedelta(days=rule.days)):
            continue
        if rule.hard:
            out.hard.setdefault(index, []).append(memory.memory_id)
        elif memory.status == "active":
            out.soft.setdefault(index, []).append(memory.memory_id)
    return out


def apply_retention(odb: OrchestratorDB, now: datetime, *, key: str, task: str,
                    dry_run: bool = False) -> dict[str, Any]:
    """Forget what is due, one edit per rule and kind (chunks of MAX_POLICY_IDS ids);
    returns ``{"count", "soft", "hard", "memoryIds", "byRule", "dryRun"}``."""
    rules = odb.memory.governance.retention
    found = due(kept(odb), rules, now)
    forgotten: list[str] = []
    by_rule: dict[str, int] = {}
    for hard, groups in ((False, found.soft), (True, found.hard)):
        for index, ids in groups.items():
            by_rule[str(index)] = by_rule.get(str(index), 0) + len(ids)
            forgotten += ids
            for start in range(0, len(ids) if not dry_run else 0, MAX_POLICY_IDS):
                chunk = ids[start:start + MAX_POLICY_IDS]
                apply_edit(odb, ForgetPolicy(
                    op="forget_policy", memory_ids=chunk, hard=hard, actor="system",
                    reason=f"retention rule {index}: {_describe(rules[index])}"),
                    key=f"{key}-r{index}-{'h' if hard else 's'}-{start}", task=task)
    soft = sum(map(len, found.soft.values()))
    summary = {"at": format_ts(now), "count": len(forgotten), "soft": soft,
               "hard": len(forgotten) - soft, "byRule": by_rule}
    if not dry_run:
        record_run(odb, summary)
    return {**summary, "memoryIds": forgotten, "dryRun": dry_run}


def _describe(rule: RetentionRule) -> str:
    match = ", ".join(f"{k} {v}" for k, v in (("type", rule.type), ("tier", rule.tier),
                                               ("scope", rule.scope)) if v) or "any memory"
    return f"{match}, {rule.days} days, {'hard' if rule.hard else 'soft'}"
