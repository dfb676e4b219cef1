"""``MemoryClient``, what an orchestrator imports, and what its calls return."""
