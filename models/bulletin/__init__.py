"""The bulletin sent with every message, and the working-memory projection ``working.md``."""
