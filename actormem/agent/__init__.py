"""Agent integration: memory hooks for a trio agent loop, and a small loop that uses them.

Source: loopctl's engine hooks (store trajectories after tool calls, inject relevant
memory before turns, consolidate after successful runs). See ``docs/agent.md`` for the
escaping rule of the memory block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._hooks import MEMORY_HEADER as MEMORY_HEADER
from ._hooks import TRAJECTORY_PART_LIMIT as TRAJECTORY_PART_LIMIT
from ._hooks import LoopMemory as LoopMemory
from ._hooks import MemoryHooks as MemoryHooks
from ._hooks import format_trajectory as format_trajectory
from ._hooks import memory_block as memory_block
from ._hooks import memory_line as memory_line
from ._text import unescape_line as unescape_line

if TYPE_CHECKING:
    from ._loop import Model as Model
    from ._loop import RunResult as RunResult
    from ._loop import Tool as Tool
    from ._loop import run_agent as run_agent

#: The agent loop's names, imported on first access (module ``__getattr__``): the loop
#: brings the context window's attrs classes, which the hooks alone (``actormem swarm``)
#: never need.
_LAZY_LOOP = frozenset({"Model", "RunResult", "Tool", "run_agent"})


def __getattr__(name: str) -> Any:
    """A name of :data:`_LAZY_LOOP`: imported on first access, then kept in the module."""
    if name not in _LAZY_LOOP:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _loop

    value = getattr(_loop, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_LOOP})

__all__ = [
    "MEMORY_HEADER",
    "TRAJECTORY_PART_LIMIT",
    "LoopMemory",
    "MemoryHooks",
    "Model",
    "RunResult",
    "Tool",
    "format_trajectory",
    "memory_block",
    "memory_line",
    "run_agent",
    "unescape_line",
]
