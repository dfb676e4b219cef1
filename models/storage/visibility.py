"""Which memories a request may see: its scope view, tags, sensitivity and status.

A request that names a session and/or a project sees the global memories plus those
of its own session and project, never another session's; one that names none sees
global memories only. ``tiers`` (profile, semantic, episodic, procedural) keeps the
memories of those tiers only; none given keeps every tier. Restricted memories are
left out unless the request asks for them (``include_restricted``, always with a
purpose, audited). ``tags`` keeps the memories that carry every one of them. A
hard-forgotten memory is seen by no one.

:meth:`View.sql` is the one definition, as a SQL condition over ``memories`` with its
parameters (:meth:`View.sees` is the same in Python, for rows already read). The
storage reads that hand memories to a surface take the reader's view (the narrowest,
:data:`DEFAULT_VIEW`, when none is given) and apply it where they read the rows:
recall's candidates, nodes, neighbours and edges, list, get, history, the bulletin,
context and working memory. A memory reached from a visible one (an edge's other end,
a neighbour, the head of an Updates chain) is shown only when the same view sees it
(``recall_reads.passing``, the one check of a list of ids): an edge to a memory the
reader may not see is left out whole, its id included.

Internal work (the writer's reconciliation, reflection, migrations' checks) reads
with :data:`EVERYTHING`, never a surface.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchmem.config import MemoryValidationError
from orchmem.models.core.governance_fields import MAX_TAGS, Tier
from orchmem.models.core.shapes import CONTROL_CHARS, MAX_ID_CHARS, MEMORY_ID_PATTERN


@dataclass(frozen=True)
class View:
    session_id: str | None = None
    project_id: str | None = None
    tags: tuple[str, ...] = ()
    include_restricted: bool = False
    #: Every session's and project's memories: the whole orchestrator's reads (internal
    #: work, :data:`EVERYTHING`, and the operator's export).
    every_scope: bool = False
    #: The tiers the request keeps (models/core/governance_fields.py); () keeps all.
    tiers: tuple[str, ...] = ()

    def sql(self, alias: str = "") -> tuple[str, list[Any]]:
        """``(condition, parameters)`` over ``memories`` (as ``alias`` when given)."""
        a = f"{alias}." if alias else ""
        scopes = ["1"] if self.every_scope else [f"{a}scope = 'global'"]
        params: list[Any] = []
        if self.session_id is not None and not self.every_scope:
            scopes.append(f"({a}scope = 'session' AND {a}session_id = ?)")
            params.append(self.session_id)
        if self.project_id is not None and not self.every_scope:
            scopes.append(f"({a}scope = 'project' AND {a}project_id = ?)")
            params.append(self.project_id)
        condition = f"({' OR '.join(scopes)})"
        if not self.include_restricted:
            condition += f" AND {a}sensitivity != 'restricted'"
        for tag in self.tags:
            condition += f" AND EXISTS (SELECT 1 FROM json_each({a}tags) WHERE value = ?)"
            params.append(tag)
        if self.tiers:
            condition += f" AND {a}tier IN ({', '.join('?' for _ in self.tiers)})"
            params += list(self.tiers)
        return condition, params

    def sees(self, scope: str, session_id: str | None, project_id: str | None,
             sensitivity: str, tags: list[str], tier: str | None = None) -> bool:
        """:meth:`sql` in Python, for one memory's stored values (``tier`` None: a row
        that has none, an episode, which a tier filter does not keep)."""
        if sensitivity == "restricted" and not self.include_restricted:
            return False
        if self.tiers and tier not in self.tiers:
            return False
        if not all(t in tags for t in self.tags):
            return False
        return (self.every_scope or scope == "global"
                or (scope == "session" and session_id is not None
                    and session_id == self.session_id)
                or (scope == "project" and project_id is not None
                    and project_id == self.project_id))

    def key(self) -> str:
        """A stable text of the view (for caches and logs)."""
        key = [self.session_id, self.project_id, list(self.tags), self.include_restricted,
               self.every_scope]
        return json.dumps([*key, list(self.tiers)] if self.tiers else key)


#: What a request that names nothing sees: global, not restricted.
DEFAULT_VIEW = View()
#: Every memory that is not forgotten: for internal work, never handed to a surface.
EVERYTHING = View(include_restricted=True, every_scope=True)
#: Every status a memory can have.
ALL_STATUSES = ("active", "superseded", "retracted")


def reached_statuses(statuses: Sequence[str]) -> list[str]:
    """The statuses a memory reached from a shown one may have (an edge's other end, a
    neighbour): those the request asked for, and superseded ones (the history of what
    it shows). A retracted memory (withdrawn, or soft-forgotten) is reached only by a
    request that asks for inactive memories."""
    return sorted({*statuses, "superseded"})


#: A memoryId anywhere in a text (an audit event's before or after names memories too:
#: a successor's ``replaces``, a link's ends).
_ANY_ID = re.compile(MEMORY_ID_PATTERN.strip("^$"))


def mentioned(*texts: str | None) -> set[str]:
    """Every memoryId written anywhere in ``texts`` (stored JSON; None is nothing)."""
    return {m for text in texts if text for m in _ANY_ID.findall(text)}


def plain_id(value: object, where: str) -> str | None:
    """An id to scope or filter by, checked: 1-MAX_ID_CHARS characters of plain text
    (None: none given). Raises MemoryValidationError naming ``where``."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS \
            or CONTROL_CHARS.search(value):
        message = f"{where}: must be 1-{MAX_ID_CHARS} characters of plain text"
        raise MemoryValidationError(message, [{"path": where, "message": message}])
    return value


def check_tiers(tiers: object, where: str = "tiers") -> tuple[str, ...]:
    """``tiers`` as a checked tuple of tier names (None: every tier); raises
    MemoryValidationError naming ``where`` for anything else."""
    if tiers is None:
        return ()
    known = [t.value for t in Tier]
    values = [tiers] if isinstance(tiers, str) else tiers
    if not isinstance(values, list | tuple) or len(values) > len(known):
        message = f"{where}: a list of tiers ({', '.join(known)})"
        raise MemoryValidationError(message, [{"path": where, "message": message}])
    for i, value in enumerate(values):
        if value not in known:
            shown = repr(value)[:40] if isinstance(value, str) else type(value).__name__
            message = f"{where}: {shown} is not a tier ({', '.join(known)})"
            raise MemoryValidationError(message, [{"path": f"{where}.{i}", "message": message}])
    return tuple(sorted(set(values), key=known.index))


def make_view(session_id: object = None, project_id: object = None, tags: object = None,
              include_restricted: bool = False, purpose: object = None,
              tiers: object = None) -> View:
    """A checked :class:`View`; raises MemoryValidationError naming the bad field
    (a restricted read without a purpose is one, an unknown tier another)."""
    tag_list = list(tags) if isinstance(tags, list | tuple) else ([] if tags is None else None)
    if tag_list is None or len(tag_list) > MAX_TAGS:
        message = f"tags: a list of at most {MAX_TAGS} tags"
        raise MemoryValidationError(message, [{"path": "tags", "message": message}])
    if include_restricted and not (isinstance(purpose, str) and purpose.strip()):
        message = "purpose: a restricted read (include_restricted) must state its purpose"
        raise MemoryValidationError(message, [{"path": "purpose", "message": message}])
    return View(session_id=plain_id(session_id, "sessionId"),
                project_id=plain_id(project_id, "projectId"),
                tags=tuple(str(plain_id(t, f"tags.{i}")) for i, t in enumerate(tag_list)),
                include_restricted=bool(include_restricted), tiers=check_tiers(tiers))
