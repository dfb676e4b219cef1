"""Explicit edits, forgetting (by id, by policy, by retention), audit history and the registry
of derived data.
"""
