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

Closing stdin ends the server, but not at once: the SDK's loop cancels the calls still
running when its input ends (a ``forget`` sent just before the client closed stdin got a
"Connection closed" error, or no answer at all, its deletion done or not). So
:func:`serve_stdio` holds the end of the input back from the SDK until every request it
read has been answered (or cancelled by the client), for at most :data:`EOF_GRACE`
seconds; only the calls still running after that are cancelled (and answered with the
SDK's "Connection closed" error). A Ctrl-C (or any cancellation) ends the wait at once.
"""

from __future__ import annotations

import collections
import functools
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any, ParamSpec, Protocol, Self, TypeVar

import anyio
import attrs
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from .._entry import MemoryCategory, MemoryEntry, ScoredEntry
from .._errors import ActorMemError, InvalidEntryError, InvalidQueryError
from .._stats import MemoryStatistics
from .._storage.jsonl import entry_to_json

__all__ = ["EOF_GRACE", "MemoryBackend", "build_mcp_server", "serve_stdio", "serve_streams"]

#: Seconds :func:`serve_stdio` goes on after stdin closed, to finish and answer the
#: requests already read (a store waits for its commit); the calls still running then
#: are cancelled and answered with the SDK's "Connection closed" error.
EOF_GRACE = 30.0


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
        where: dict[str, Any] | None = ...,
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
        key: str | None = None,
        value: dict[str, Any] | None = None,
    ) -> dict[str, str]:
        """Store one memory entry and return its id.

        Args:
            text: What to remember (non-empty).
            category: One of fact, insight, trajectory, error_pattern, strategy, ...
                (default fact).
            tags: Labels to filter on later.
            namespace: A path of segments, e.g. ["team-a", "agent-1"], to recall within.
            relevance: Weight in [0, 1]; low-relevance entries are evicted first.
            key: A name unique within the namespace: remembering the same key again
                replaces the entry (its id is kept).
            value: A JSON object stored with the text, for `recall`'s `where` filter.
        """
        if not text.strip():
            raise InvalidEntryError("text must not be empty: there is nothing to remember")
        entry = MemoryEntry(
            category=_category(category),
            memory=text,
            tags=tags or (),
            namespace=namespace or (),
            relevance=relevance,
            key=key,
            value=value,
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
        where: dict[str, Any] | None = None,
    ) -> dict[str, list[dict[str, Any]]]:
        """`hits`: the entries most relevant to `query`, best first, each with its score.

        Args:
            query: What to look for (the task, the question, the last tool result).
            limit: Most entries returned (>= 0, default 5).
            namespace: Only entries whose namespace starts with these segments.
            category: Only entries of this category.
            tags: Only entries carrying every one of these tags.
            where: Only entries whose JSON payload matches: dotted paths to a value, or
                to {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": value}.
        """
        hits = await memory.retrieve_scored(
            query,
            limit,
            namespace=namespace,
            category=None if category is None else _category(category),
            tags=tags,
            where=where,
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


class _Unanswered:
    """The requests read from the client and not yet answered, by id (as text: the SDK
    correlates ``7`` and ``"7"`` as one id), with an event set once none is left after
    the input ended."""

    def __init__(self) -> None:
        self.count: collections.Counter[str] = collections.Counter()
        self.none_left: anyio.Event | None = None  # made when the input ends

    def read(self, item: object) -> None:
        """Note a message read from the client: a request is owed an answer; a
        ``notifications/cancelled`` withdraws its request (the SDK never answers one)."""
        if not isinstance(item, SessionMessage):
            return
        message = item.message
        if isinstance(message, JSONRPCRequest):
            self.count[str(message.id)] += 1
        elif isinstance(message, JSONRPCNotification) and message.method == (
            "notifications/cancelled"
        ):
            params = message.params or {}
            self._settled(str(params.get("requestId")))

    def written(self, item: SessionMessage) -> None:
        """Note a message written to the client: an answer settles its request."""
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._settled(str(message.id))

    def _settled(self, key: str) -> None:
        if self.count[key] > 1:
            self.count[key] -= 1
        else:
            self.count.pop(key, None)
        if not self.count and self.none_left is not None:
            self.none_left.set()

    async def wait(self, grace: float) -> None:
        """After the input ended: until every request read is answered, ``grace``
        seconds at most (a cancellation, such as a Ctrl-C, ends it at once)."""
        if self.none_left is None:
            self.none_left = anyio.Event()
        if not self.count:
            return
        with anyio.move_on_after(grace):
            await self.none_left.wait()
        if self.count:
            logging.getLogger("actormem").warning(
                "actormem mcp: %d request(s) still running %g s after stdin closed: cancelled",
                sum(self.count.values()),
                grace,
            )


class _Wrapped:
    """A wrapper of one of the SDK's streams: closing it closes the wrapped one."""

    _inner: Any

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _HeldEnd(_Wrapped):
    """The SDK's read stream, whose end reaches the SDK only once :class:`_Unanswered`
    has nothing left (or its grace ran out): the SDK cancels what still runs at the end
    of its input."""

    def __init__(self, inner: Any, unanswered: _Unanswered, grace: float) -> None:
        self._inner = inner
        self._unanswered = unanswered
        self._grace = grace

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK reads it if present)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            await self._unanswered.wait(self._grace)
            raise
        self._unanswered.read(item)
        return item

    def __aiter__(self) -> _HeldEnd:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Answers(_Wrapped):
    """The SDK's write stream, telling :class:`_Unanswered` of each answer sent."""

    def __init__(self, inner: Any, unanswered: _Unanswered) -> None:
        self._inner = inner
        self._unanswered = unanswered

    async def send(self, item: SessionMessage) -> None:
        try:
            await self._inner.send(item)
        finally:  # sent, or never to be: not waited for either way
            self._unanswered.written(item)


def _check_grace(grace: object) -> None:
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
        raise ValueError(f"grace must be a number of seconds >= 0, got {grace!r}")


async def serve_streams(
    server: MCPServer, read_stream: Any, write_stream: Any, *, grace: float = EOF_GRACE
) -> None:
    """Serve ``server`` over the SDK's stream pair until ``read_stream`` ends, then
    answer every request already read before returning, waiting ``grace`` seconds at
    most (a float >= 0, ``math.inf`` for no bound); the calls still running then are
    cancelled by the SDK (answered "Connection closed"). A cancellation (Ctrl-C) ends
    the wait at once. O(1) per message on top of the SDK's work.

    Raises:
        ValueError: ``grace`` is negative or not a number.
    """
    _check_grace(grace)
    unanswered = _Unanswered()
    lowlevel = server._lowlevel_server  # what the SDK's own run_stdio_async drives
    await lowlevel.run(
        _HeldEnd(read_stream, unanswered, float(grace)),
        _Answers(write_stream, unanswered),
        lowlevel.create_initialization_options(),
    )


async def serve_stdio(server: MCPServer, *, grace: float = EOF_GRACE) -> None:
    """``server.run_stdio_async()``, except that closing stdin does not cut the
    requests in flight: they are finished and answered first (:func:`serve_streams`;
    ``grace`` seconds at most). Runs under trio or asyncio.

    Raises:
        ValueError: ``grace`` is negative or not a number.
    """
    _check_grace(grace)
    async with stdio_server() as (read_stream, write_stream):
        await serve_streams(server, read_stream, write_stream, grace=grace)
