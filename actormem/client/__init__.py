"""Using one memory from code that is not a trio task of the memory's own process.

* :class:`HostedMemory`: a memory in this process, its owner under trio in a thread of
  its own, for asyncio and synchronous programs.
* :class:`AsyncClient` (asyncio or trio) and :class:`Client` (synchronous): the methods
  of :class:`~actormem.Memory` over HTTP, against ``actormem serve`` (docs/server.md).
  They need httpx (the ``client`` or ``server`` extra); it is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._util import install_hint
from ._hosted import HostedMemory, SyncHostedMemory

if TYPE_CHECKING:
    from ._http import AsyncClient, Client

__all__ = ["AsyncClient", "Client", "HostedMemory", "SyncHostedMemory"]


def __getattr__(name: str) -> Any:
    if name in ("AsyncClient", "Client"):
        try:
            from . import _http
        except ModuleNotFoundError as exc:
            if exc.name != "httpx":
                raise
            # Still a ModuleNotFoundError naming httpx, so that callers that map a
            # missing package to its extra (the CLI) keep doing so.
            raise ModuleNotFoundError(
                f"actormem.client.{name} needs httpx: {install_hint('client')}",
                name="httpx",
            ) from exc
        return getattr(_http, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
