"""Celery tasks: each one applies one feature of ``models/`` to one orchestrator inside a
transaction, exactly once per idempotency key (``base.py`` and ``pipeline.py`` hold what
runs around every task)."""
