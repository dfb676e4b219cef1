"""The ``orchmem`` command line (entry point ``orchmem.worker.cli:main``)."""

from orchmem.worker.cli.main import main

__all__ = ["main"]
