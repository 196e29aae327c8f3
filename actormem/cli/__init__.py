"""The ``actormem`` command: its parser, the swarm run and its display."""

from .._util import import_pause

with import_pause():  # the command line's modules load with the collector paused
    from ._main import main as main
    from ._main import run_command as run_command

del import_pause

__all__ = ["main", "run_command"]
