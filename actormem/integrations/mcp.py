"""A Model Context Protocol (MCP) server over one memory: ``actormem mcp``.

Theory of operation
-------------------
An MCP client (a desktop assistant, an IDE agent, any program using the ``mcp`` SDK)
starts ``actormem mcp`` as a child process and talks JSON-RPC to it over stdin/stdout.
The server offers four tools:

* ``remember(text, category="fact", tags=[], namespace=[], relevance=1.0)`` stores one
  entry and returns its id;
* ``recall(query, limit=5, namespace=None, category=None, tags=None)`` returns
  ``{"hits": [...]}``, the best entries for the query, best first, with their scores;
* ``forget(id)`` deletes an entry and says whether it was there;
* ``stats()`` returns the memory's statistics (:class:`~actormem.MemoryStatistics`).

The memory behind it is either one this process opens (a file, or in memory) or a running
``actormem serve`` reached with :class:`~actormem.client.AsyncClient`: both have the same
async methods, so :func:`build_mcp_server` takes either. The ``mcp`` SDK runs on anyio,
so the server runs under trio beside the memory's owner task.

Errors: bad arguments (an empty text, an unknown category, a negative limit, a malformed
id) come back to the client as a tool error whose text names the problem; the memory is
not changed (the memory's own checks raise, :func:`_reported` passes the message on).
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, ParamSpec, Protocol, TypeVar

import attrs
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .._entry import MemoryCategory, MemoryEntry, ScoredEntry
from .._errors import ActorMemError, InvalidEntryError, InvalidQueryError
from .._stats import MemoryStatistics
from .._storage.jsonl import entry_to_json

__all__ = ["MemoryBackend", "build_mcp_server"]


class MemoryBackend(Protocol):
    """What the MCP tools call: :class:`~actormem.Memory` or an ``AsyncClient``."""

    async def store(self, entry: MemoryEntry) -> None: ...

    async def delete(self, id: uuid.UUID) -> bool: ...

    async def retrieve_scored(
        self,
        query: str,
        limit: int = ...,
        *,
        namespace: Iterable[str] | None = ...,
        category: MemoryCategory | Iterable[MemoryCategory] | None = ...,
        tags: Iterable[str] | None = ...,
    ) -> list[ScoredEntry]: ...

    def statistics(self) -> MemoryStatistics | Awaitable[MemoryStatistics]: ...


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _reported(
    tool: Callable[_P, Coroutine[Any, Any, _T]],
) -> Callable[_P, Coroutine[Any, Any, _T]]:
    """Turn the errors a caller's arguments cause into a :class:`ToolError` with their
    message (the SDK shows the client only "Error executing tool" for other exceptions);
    bugs still propagate as they are."""

    @functools.wraps(tool)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await tool(*args, **kwargs)
        except (ActorMemError, ValueError, TypeError) as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return run


def _category(value: str) -> MemoryCategory:
    try:
        return MemoryCategory(value)
    except ValueError:
        names = ", ".join(c.value for c in MemoryCategory)
        raise InvalidEntryError(f"unknown category {value!r}; expected one of: {names}") from None


def _hit(hit: ScoredEntry) -> dict[str, Any]:
    row = entry_to_json(hit.entry)
    return {"score": hit.score, **row}


def build_mcp_server(memory: MemoryBackend, *, name: str = "actormem") -> MCPServer:
    """An MCP server whose tools read and write ``memory``.

    Args:
        memory: An open :class:`~actormem.Memory` (trio, this process) or an
            :class:`~actormem.client.AsyncClient` of a running server. It must stay open
            while the server runs.
        name: The server's name, as MCP clients show it.

    Returns:
        The server; run it with ``await server.run_stdio_async()`` (under trio or asyncio).

    Each tool call costs what the memory operation costs (a store, a retrieve, a delete:
    see :class:`~actormem.Memory`), plus the JSON encoding of its result.
    """
    server: MCPServer = MCPServer(
        name,
        instructions=(
            "A shared long-term memory. Call `recall` with the task at hand before acting, "
            "and `remember` what you learned (facts, insights, error patterns) afterwards."
        ),
    )

    @server.tool()
    @_reported
    async def remember(
        text: str,
        category: str = "fact",
        tags: list[str] | None = None,
        namespace: list[str] | None = None,
        relevance: float = 1.0,
    ) -> dict[str, str]:
        """Store one memory entry and return its id.

        Args:
            text: What to remember (non-empty).
            category: One of fact, insight, trajectory, error_pattern, strategy, ...
                (default fact).
            tags: Labels to filter on later.
            namespace: A path of segments, e.g. ["team-a", "agent-1"], to recall within.
            relevance: Weight in [0, 1]; low-relevance entries are evicted first.
        """
        if not text.strip():
            raise InvalidEntryError("text must not be empty: there is nothing to remember")
        entry = MemoryEntry(
            category=_category(category),
            memory=text,
            tags=tags or (),
            namespace=namespace or (),
            relevance=relevance,
        )
        await memory.store(entry)
        return {"id": str(entry.id)}

    @server.tool()
    @_reported
    async def recall(
        query: str,
        limit: int = 5,
        namespace: list[str] | None = None,
        category: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, list[dict[str, Any]]]:
        """`hits`: the entries most relevant to `query`, best first, each with its score.

        Args:
            query: What to look for (the task, the question, the last tool result).
            limit: Most entries returned (>= 0, default 5).
            namespace: Only entries whose namespace starts with these segments.
            category: Only entries of this category.
            tags: Only entries carrying every one of these tags.
        """
        hits = await memory.retrieve_scored(
            query,
            limit,
            namespace=namespace,
            category=None if category is None else _category(category),
            tags=tags,
        )
        return {"hits": [_hit(h) for h in hits]}

    @server.tool()
    @_reported
    async def forget(id: str) -> dict[str, bool]:
        """Delete the entry with this id; `deleted` says whether it was stored."""
        try:
            key = uuid.UUID(id)
        except ValueError:
            raise InvalidQueryError(f"id must be a UUID, got {id!r}") from None
        return {"deleted": await memory.delete(key)}

    @server.tool()
    @_reported
    async def stats() -> dict[str, Any]:
        """The memory's statistics: entry count, capacity, stores, evictions, ..."""
        got = memory.statistics()
        result: MemoryStatistics = await got if inspect.isawaitable(got) else got
        return attrs.asdict(result)

    return server
