"""Settings of governance: the secret detector and the retention rules.

``memory.governance`` in the TOML file or per orchestrator. A retention rule matches
memories by any of ``type``, ``tier`` and ``scope`` (an omitted key matches all) and
forgets those older than ``days`` (for a session-scoped memory: since its session's
last activity, the newest memory of that session), softly unless ``hard``. The first
rule that matches a memory decides; ``days`` 0 means "keep forever" and stops the
search, so a specific keep-rule before a broad forget-rule protects (profile never).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: Every rule of the secret detector (models/writeback/secrets.py), by name.
SECRET_RULES = ("private_key", "aws_access_key", "github_token", "slack_token",
                "api_key_prefixed", "stripe_key", "google_api_key", "jwt", "bearer_token",
                "credential_assignment", "password_stated", "url_credentials",
                "payment_card")


class RetentionRule(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    type: Literal["Fact", "Preference", "Decision", "Identity", "Event", "Observation",
                  "Goal", "Todo"] | None = None
    tier: Literal["profile", "semantic", "episodic", "procedural"] | None = None
    scope: Literal["global", "project", "session"] | None = None
    days: int = Field(ge=0, le=36_500)
    hard: bool = False


def _default_rules() -> list[RetentionRule]:
    return [RetentionRule(tier="profile", days=0),
            RetentionRule(scope="session", days=30),
            RetentionRule(type="Observation", tier="episodic", days=180)]


class GovernanceSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    #: Mark a memory restricted on write when a rule of the detector finds a secret.
    secret_detector: bool = True
    #: The detector's rules in use (default: all of SECRET_RULES).
    secret_rules: list[Literal[SECRET_RULES]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(SECRET_RULES))
    #: Retention, applied by the beat job ``retention`` (first matching rule wins).
    retention: list[RetentionRule] = Field(default_factory=_default_rules)
    #: Turn the retention beat job off for an orchestrator.
    retention_enabled: bool = True
    #: How often beat runs the retention job (0: never). Read from the global settings.
    retention_interval_s: int = Field(24 * 3600, ge=0)
