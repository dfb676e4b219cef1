"""Exactly-once delivery: the outbox, receipts, dead letters and the ingest manifest."""
