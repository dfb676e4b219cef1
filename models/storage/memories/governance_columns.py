"""A node's governance fields from the stored columns: shared by the row
reads of rows.py and search/reads.py (no database import, so either may use it)."""

from __future__ import annotations

import json
from typing import Any

from orchmem.models.core.governance_fields import Scope, Sensitivity, Tier


def governance_fields(tier: str, scope: str, session_id: str | None, project_id: str | None,
                      sensitivity: str, tags: str, metadata: str) -> dict[str, Any]:
    """A node's governance fields from the stored columns."""
    return {"tier": Tier(tier), "scope": Scope(scope), "session_id": session_id,
            "project_id": project_id, "sensitivity": Sensitivity(sensitivity),
            "tags": _loaded(tags, "[]", list), "metadata": _loaded(metadata, "{}", dict)}


def _loaded(text: str | None, empty: str, make: type) -> Any:
    # Most memories have no tags and no metadata: no JSON parse for those.
    return make() if not text or text == empty else json.loads(text)
