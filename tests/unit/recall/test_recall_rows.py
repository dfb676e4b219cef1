"""The positions other modules read in a recall node row match its column list (the row
is a plain tuple for speed, so a column added in the middle would shift them)."""

from __future__ import annotations

from orchmem.models.storage.memories.validity_columns import TIME_COLUMNS_SQL
from orchmem.models.storage.search import reads as recall_reads


def test_the_named_positions_are_those_of_their_columns() -> None:
    names = [c.strip() for c in (recall_reads._NODE_COLUMNS + TIME_COLUMNS_SQL).split(",")]
    assert names.index("status") == recall_reads.STATUS
    assert names.index("created_at") == recall_reads.CREATED_AT
    assert names.index("updated_at") == recall_reads.UPDATED_AT
    assert names[recall_reads.GOVERNANCE] == ["tier", "scope", "session_id", "project_id",
                                              "sensitivity", "tags", "metadata"]
    assert [names.index(n) for n in ("valid_from", "valid_to", "time_refs")] == [
        recall_reads.VALID_FROM, recall_reads.VALID_TO, recall_reads.TIME_REFS]
