"""Reading ``Contradicts`` edges with the status of both ends.

Whether one still stands is domain policy (:func:`orchmem.models.contradictions.unresolved`);
this module only reads the edges, so recall and the bulletin judge the same values.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..contradictions import Contradiction
from ..schema import EdgeType, Status
from .database import OrchestratorDB


def contradictions(odb: OrchestratorDB, older_ids: Sequence[str] | None = None
                   ) -> list[Contradiction]:
    """Every ``Contradicts`` edge (only those whose older end is in ``older_ids``, if given),
    newest newer end first, then by edgeId.

    One statement: run it inside the caller's ``odb.read()`` to share its snapshot.
    """
    if older_ids is not None and not older_ids:
        return []
    # CROSS JOIN fixes the join order: edges first (by the to_memory index when ids are
    # given), then each end by its primary key.
    sql = ("SELECT e.edge_id, e.from_memory_id, e.to_memory_id, f.status, t.status "
           "FROM memory_edges e CROSS JOIN memories f ON f.memory_id = e.from_memory_id "
           "CROSS JOIN memories t ON t.memory_id = e.to_memory_id WHERE e.edge_type = ?")
    params: list[str] = [EdgeType.CONTRADICTS.value]
    if older_ids is not None:
        sql += f" AND e.to_memory_id IN ({','.join('?' * len(older_ids))})"
        params += list(older_ids)
    rows = odb.sql(sql + " ORDER BY f.created_at DESC, e.edge_id", params)
    return [Contradiction(edge_id=r[0], newer_id=r[1], older_id=r[2],
                          newer_status=Status(r[3]), older_status=Status(r[4])) for r in rows]
