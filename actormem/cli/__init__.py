"""The ``actormem`` command: its parser, the swarm run and its display."""

from ._main import main as main

__all__ = ["main"]
