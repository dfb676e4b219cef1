"""The storage layer: the only code that runs SQL on an orchestrator's files.

One module a concept: ``database`` (opening, pragmas, the per-process registry; a
reader's registry opens files read-only), ``integrity`` (checks and quarantine),
``tables`` (the Peewee tables, the DDL, "live" defined once), ``memories`` (memories and
their sources), ``edges``, ``vectors`` (embeddings and the cached index), ``fts``,
``events`` (the audit log and meta), ``receipts`` (the receipt protocol),
``deadletters``, ``manifest`` (ingest), ``outbox`` (memory/outbox.db), ``forget`` (a
hard forget's erasure), ``stats``, and the multi-statement reads, each in one snapshot:
``recall_reads``, ``bulletin_reads``, ``history_reads``, ``contradictions``,
``provenance``. Everything above this package calls these named operations and never
imports a table class or writes SQL; ``tests/unit/layout/test_layers.py`` enforces it, and
``tests/integration/storage/test_storage_contract.py`` states what each operation promises.
"""

__all__: list[str] = []
