"""Agent integration: memory hooks for a trio agent loop, and a small loop that uses them.

Source: loopctl's engine hooks (store trajectories after tool calls, inject relevant
memory before turns, consolidate after successful runs). See ``docs/agent.md`` for the
escaping rule of the memory block.
"""

from __future__ import annotations

from ._hooks import MEMORY_HEADER as MEMORY_HEADER
from ._hooks import TRAJECTORY_PART_LIMIT as TRAJECTORY_PART_LIMIT
from ._hooks import LoopMemory as LoopMemory
from ._hooks import MemoryHooks as MemoryHooks
from ._hooks import format_trajectory as format_trajectory
from ._hooks import memory_block as memory_block
from ._hooks import memory_line as memory_line
from ._loop import Model as Model
from ._loop import RunResult as RunResult
from ._loop import Tool as Tool
from ._loop import run_agent as run_agent
from ._text import unescape_line as unescape_line

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
