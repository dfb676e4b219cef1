"""The storage layer: the only code that runs SQL on an orchestrator's files.

One module a concept: ``database`` (opening, pragmas, the per-process registry),
``integrity`` (checks and quarantine), ``tables`` (the Peewee tables and DDL),
``memories``, ``edges``, ``sources`` live in ``memories``, ``vectors``, ``fts``,
``events`` (audit log and meta), ``receipts``, ``deadletters``, ``manifest`` (ingest),
``outbox`` (memory/outbox.db), ``reads`` (multi-statement reads in one snapshot) and
``stats``. Everything above this package calls these named operations and never
imports a table class or writes SQL; ``tests/unit/test_layers.py`` enforces it.
"""

__all__: list[str] = []
