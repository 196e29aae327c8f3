"""Using one memory from code that is not a trio task of its own process.

* :class:`HostedMemory`: a memory in this process, its owner under trio in a thread of
  its own, for asyncio and synchronous programs.
"""

from __future__ import annotations

from ._hosted import HostedMemory, SyncHostedMemory

__all__ = ["HostedMemory", "SyncHostedMemory"]
