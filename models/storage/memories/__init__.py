"""Memories, their edges, sources, audit events and governance columns, as rows."""
