"""``python -m orchmem.worker``: the same commands as ``orchmem``."""

from orchmem.worker.cli import main

main(prog_name="orchmem")
