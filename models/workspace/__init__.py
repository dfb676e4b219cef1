"""An orchestrator's folders and the files orchmem keeps in them: private, replaced atomically,
logged.
"""
