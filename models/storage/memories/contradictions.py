"""Reading ``Contradicts`` edges with the status of both ends.

Whether one still stands is domain policy (:func:`orchmem.models.core.contradictions.unresolved`);
this module only reads the edges, so recall and the bulletin judge the same values.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchmem.models.core.contradictions import Contradiction
from orchmem.models.core.shapes import EdgeType, Status
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.search import row_cache


def contradictions(odb: OrchestratorDB, older_ids: Sequence[str] | None = None
                   ) -> list[Contradiction]:
    """Every ``Contradicts`` edge (only those whose older end is in ``older_ids``, if given),
    newest newer end first, then by edgeId.

    One statement: run it inside the caller's ``odb.read()`` to share its snapshot.
    """
    if older_ids is not None and not older_ids:
        return []
    cache = row_cache.current(odb) if older_ids is not None else None
    if cache is not None and older_ids is not None:
        held = cache.per_memory("contradictions", older_ids,
                                lambda missing: _by_older(odb, missing))
        found = {c.edge_id: (at, c) for m in dict.fromkeys(older_ids) for at, c in held[m]}
        # ORDER BY created_at DESC, edge_id: a stable sort, reversed, keeps the edgeIds' order
        by_edge = sorted(found.values(), key=lambda f: f[1].edge_id)
        return [c for _, c in sorted(by_edge, key=lambda f: f[0], reverse=True)]
    return [c for _, c in _read(odb, older_ids)]


def _by_older(odb: OrchestratorDB, older_ids: list[str]
              ) -> dict[str, list[tuple[str, Contradiction]]]:
    """older memoryId -> (the newer end's createdAt, the contradiction) of each edge."""
    out: dict[str, list[tuple[str, Contradiction]]] = {m: [] for m in older_ids}
    for at, found in _read(odb, older_ids):
        out[found.older_id].append((at, found))
    return out


def _read(odb: OrchestratorDB, older_ids: Sequence[str] | None
          ) -> list[tuple[str, Contradiction]]:
    # CROSS JOIN fixes the join order: edges first (by the to_memory index when ids are
    # given), then each end by its primary key.
    sql = ("SELECT e.edge_id, e.from_memory_id, e.to_memory_id, f.status, t.status, "
           "f.created_at "
           "FROM memory_edges e CROSS JOIN memories f ON f.memory_id = e.from_memory_id "
           "CROSS JOIN memories t ON t.memory_id = e.to_memory_id WHERE e.edge_type = ?")
    params: list[str] = [EdgeType.CONTRADICTS.value]
    if older_ids is not None:
        sql += f" AND e.to_memory_id IN ({','.join('?' * len(older_ids))})"
        params += list(older_ids)
    rows = odb.sql(sql + " ORDER BY f.created_at DESC, e.edge_id", params)
    return [(r[5], Contradiction(edge_id=r[0], newer_id=r[1], older_id=r[2],
                                 newer_status=Status(r[3]), older_status=Status(r[4])))
            for r in rows]
