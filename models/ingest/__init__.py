"""Files dropped in ``memory/ingest/`` become memories exactly once."""
