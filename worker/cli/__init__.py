"""The ``orchmem`` command line (entry point ``orchmem.worker.cli:main``)."""

from .main import main

__all__ = ["main"]
