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

A line the SDK cannot read is answered as JSON-RPC 2.0 says (the SDK drops it without a
word, so a client waits for an answer that never comes): text that is not JSON gets
error -32700 "Parse error" with id null; JSON whose strings hold an escaped lone
surrogate (``"\\ud800"``, valid JSON text but not Unicode: the SDK's parser refuses it)
gets -32700 too, with the request's id when it is a request; JSON that is not a JSON-RPC
message gets -32600 "Invalid Request" with id null (:func:`_answer_to_unreadable`). A
blank line is skipped, as before.

A request whose id is neither a string nor an integer breaks MCP's rule (a string or an
integer, never null) while JSON-RPC 2.0 takes any number and null too; the SDK reads it
as a notification (it drops the id) and never answers. It is answered -32600 "Invalid
Request" and not acted on (:func:`_answer_to_bad_id`): with the id as sent when it is a
number (``3.5``, so the client's call ends), with id null otherwise (``null``,
``true``, an array, an object: JSON-RPC's answer when the id cannot be told). This needs
the line as read (the SDK's message has lost the id), which :class:`_PolledLines`
keeps beside: :func:`serve_streams` over the caller's own streams does not answer them.

The initialize answer's ``serverInfo.version`` is the installed actormem's version
(:func:`~actormem._version.package_version`, as ``actormem --version``).

A memory that broke (a failed commit: disk full, I/O error; ``docs/durability.md``)
fails every later call with ``trio.BrokenResourceError``: the tool answers "the memory
is broken and takes no more calls: StorageError: ..." (the SDK logs one line for it), not
the SDK's bare "Error executing tool" with a traceback logged per call.

:func:`serve_stdio` reads stdin on the event loop (:class:`_PolledLines`: the loop's
readiness wait on the descriptor, then a read of what is there). The SDK's own reader
runs ``readline`` in a worker thread, which a cancellation cannot stop while no line
comes (a Ctrl-C, or the ``actormem mcp`` command's SIGTERM, then waited until the client
wrote or closed stdin); a thread abandoned instead (the path before, knob
:data:`_ABANDON_STDIN_READ`) went on reading: it took the lines meant for a later
serving in the same process, and under asyncio kept the process from exiting. A
cancelled wait leaves nothing pending, and the bytes read but not handed out are kept
for the next serving.

:func:`serve_stdio` writes its answers itself (:class:`_StdoutAnswers`: one daemon
thread per serving writes them to a private duplicate of descriptor 1, which points at
stderr meanwhile, as the SDK's own claim does). The SDK's writer task took each answer
from a zero-buffer stream and then wrote it in a worker thread: a cancellation that came
between the two (the answer made, the ``remember``'s store committed) lost it, and one
that came while its ``flush`` waited on a stdout nobody read waited for ever. Here an
answer is captured (encoded into the writer's buffer) in the call that sends it, before
any wait; a cancelled serving then goes on writing what it captured, shielded, for at
most :data:`FLUSH_GRACE` seconds, and raises the cancellation after. Nothing is read
from stdin meanwhile (its reader was closed first). The serving runs in a task of its
own, so that a cancellation of the caller under asyncio (``task.cancel()``) reaches the
SDK's tasks all at once through an anyio scope, as under trio (it came out as the SDK's
``BrokenResourceError`` otherwise: its read loop, cancelled first, closed the stream its
relay task was handing a line to).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import io
import json
import logging
import math
import os
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from types import TracebackType
from typing import Any, ParamSpec, Protocol, Self, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import attrs
import pydantic
import trio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from .._entry import MemoryCategory, MemoryEntry, ScoredEntry
from .._errors import ActorMemError, InvalidEntryError, InvalidQueryError, StorageError
from .._stats import MemoryStatistics
from .._storage.jsonl import entry_to_json
from .._version import package_version

__all__ = [
    "EOF_GRACE",
    "FLUSH_GRACE",
    "MemoryBackend",
    "build_mcp_server",
    "serve_stdio",
    "serve_streams",
]

#: Seconds :func:`serve_stdio` goes on after stdin closed, to finish and answer the
#: requests already read (a store waits for its commit); the calls still running then
#: are cancelled and answered with the SDK's "Connection closed" error.
EOF_GRACE = 30.0

#: Seconds a cancelled :func:`serve_stdio` goes on writing the answers it already made
#: (each captured in full before the cancellation) to a stdout the client does not read;
#: what is still unwritten then is dropped, and the cancellation goes on. A client that
#: reads its stdout gets them at once.
FLUSH_GRACE = 5.0

#: Answer a line the SDK cannot read (not JSON, a lone surrogate, not a JSON-RPC
#: message) with a JSON-RPC error (:func:`_answer_to_unreadable`). Off: the SDK drops it
#: without an answer, as before.
_ANSWER_UNREADABLE = True

#: A broken memory's calls (``trio.BrokenResourceError`` from a failed commit) and the
#: failed commit's own callers (``StorageError``) answer "the memory is broken ..."
#: as a tool error (the SDK logs one line). Off: the SDK's "Error executing tool" with a
#: traceback logged per call, as before.
_BROKEN_AS_TOOL_ERROR = True

#: :func:`serve_stdio` reads stdin in a worker thread a cancellation abandons
#: (:class:`_AbandonedLines`). Off: the SDK's reader, which a cancellation waits for
#: until the client writes a line or closes stdin.
_ABANDON_STDIN_READ = True

#: :func:`serve_stdio` reads stdin on the event loop itself (:class:`_PolledLines`: the
#: loop's readiness wait, then one ``os.read``), so that a cancellation leaves no read
#: pending: no thread goes on taking the client's next lines from a later serving, and
#: none keeps an asyncio program alive at its exit. Off: :data:`_ABANDON_STDIN_READ`'s
#: abandoned worker thread (or the SDK's reader), as before.
_POLL_STDIN = True

#: :func:`serve_stdio` writes its answers itself (:class:`_StdoutAnswers`), so that a
#: cancellation neither loses an answer already made nor waits for ever on a stdout
#: nobody reads (:data:`FLUSH_GRACE`). Off: the SDK's writer task, as before.
_WRITE_STDOUT = True

#: A request whose id is not a string or an integer (``3.5``, ``true``, ``null``, an
#: array, an object), which the SDK reads as a notification (it drops the id) and so
#: never answers, is answered -32600 "Invalid Request" and not acted on
#: (:func:`_answer_to_bad_id`). Off: dropped without an answer, as before.
_ANSWER_BAD_IDS = True


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
    message (the SDK shows the client only "Error executing tool" for other exceptions,
    and logs their traceback), and a broken memory's errors into one that names the
    cause (:func:`_broken`); bugs still propagate as they are."""

    @functools.wraps(tool)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await tool(*args, **kwargs)
        except (
            ActorMemError,
            ValueError,
            TypeError,
            trio.BrokenResourceError,
            trio.ClosedResourceError,  # the memory closed under a call (a signal's race)
        ) as exc:
            if _BROKEN_AS_TOOL_ERROR and isinstance(exc, StorageError | trio.BrokenResourceError):
                raise ToolError(_broken(exc)) from exc
            if isinstance(exc, trio.BrokenResourceError):  # (the knob off) as before
                raise
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return run


def _broken(exc: BaseException) -> str:
    """The tool error's text for a memory that broke: the cause's type and message (the
    failed commit's ``StorageError``, the ``__cause__`` of the ``BrokenResourceError``
    every later call raises)."""
    cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) else exc
    if cause is None:  # broken without a recorded cause: say what was raised
        cause = exc
    return f"the memory is broken and takes no more calls: {type(cause).__name__}: {cause}"


def _category(value: str) -> MemoryCategory:
    try:
        return MemoryCategory(value)
    except ValueError:
        names = ", ".join(c.value for c in MemoryCategory)
        raise InvalidEntryError(f"unknown category {value!r}; expected one of: {names}") from None


def _hit(hit: ScoredEntry) -> dict[str, Any]:
    row = entry_to_json(hit.entry)
    return {"score": hit.score, **row}


def build_mcp_server(
    memory: MemoryBackend, *, name: str = "actormem", version: str | None = None
) -> MCPServer:
    """An MCP server whose tools read and write ``memory``.

    Args:
        memory: An open :class:`~actormem.Memory` (trio, this process) or an
            :class:`~actormem.client.AsyncClient` of a running server. It must stay open
            while the server runs.
        name: The server's name, as MCP clients show it.
        version: The version the server reports (``serverInfo.version`` in its answer
            to ``initialize``); None (the default): the installed actormem's version, read
            as ``actormem --version`` reads it (``"unknown"`` from a bare source tree).

    Returns:
        The server; run it with ``await server.run_stdio_async()`` (under trio or asyncio).

    Each tool call costs what the memory operation costs (a store, a retrieve, a delete:
    see :class:`~actormem.Memory`), plus the JSON encoding of its result.
    """
    server: MCPServer = MCPServer(
        name,
        version=package_version() if version is None else version,
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
    of its input. A line the SDK could not read (an exception among the items) is
    answered on ``answers`` (:func:`_answer_to_unreadable`) before it is passed on; a
    request with an id of another type, which the SDK read as a notification, is
    answered there (:func:`_answer_to_bad_id`) and not passed on. ``lines``: the raw
    lines the items were read from, in order, one per item (:class:`_PolledLines`
    fills it; None: not known, and such a request is passed on unanswered)."""

    def __init__(
        self,
        inner: Any,
        unanswered: _Unanswered,
        grace: float,
        answers: Any = None,
        lines: collections.deque[str] | None = None,
    ) -> None:
        self._inner = inner
        self._unanswered = unanswered
        self._grace = grace
        self._answers = answers
        self._lines = lines

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK reads it if present)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            try:
                item = await self._inner.receive()
            except anyio.EndOfStream:
                await self._unanswered.wait(self._grace)
                raise
            line = self._lines.popleft() if self._lines else None
            if isinstance(item, Exception):
                await self._send(_answer_to_unreadable(item) if _ANSWER_UNREADABLE else None)
            elif line is not None and _ANSWER_BAD_IDS:
                answer = _answer_to_bad_id(item, line)
                if answer is not None:  # an invalid request: answered, never acted on
                    await self._send(answer)
                    continue
            self._unanswered.read(item)
            return item

    async def _send(self, answer: JSONRPCError | None) -> None:
        """Send ``answer`` (if any) to the client; dropped when the client is gone (as
        the SDK drops its own answers then)."""
        if answer is None or self._answers is None:
            return
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._answers.send(SessionMessage(answer))

    def __aiter__(self) -> _HeldEnd:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


def _answer_to_unreadable(exc: Exception) -> JSONRPCError | None:
    """The JSON-RPC 2.0 answer to a line the SDK could not read (``exc``: the pydantic
    ``ValidationError`` its stdio transport passes on in place of a message), or None
    when none is due. O(length of the line).

    * not JSON: -32700 "Parse error", id null (the id cannot be read);
    * JSON the SDK's parser refuses, an escaped lone surrogate (``"\\ud800"``: valid
      JSON text, but not Unicode, and MCP messages are UTF-8): -32700 with the
      request's id (so the client's call ends), no answer to a notification or a
      response (JSON-RPC never answers them), id null otherwise;
    * JSON that is not a JSON-RPC message: -32600 "Invalid Request", id null;
    * a blank line, or another exception (not the SDK's parse error): no answer.
    """
    if not isinstance(exc, pydantic.ValidationError):
        return None
    errors = exc.errors(include_url=False)
    unparsed = next((e for e in errors if e["type"] == "json_invalid"), None)
    if unparsed is None:
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:3])
        detail = f"not a JSON-RPC message: {detail}"
        return _error(None, INVALID_REQUEST, "Invalid Request", detail)
    line = unparsed.get("input")
    if not isinstance(line, str) or not line.strip():
        return None
    reason = unparsed.get("ctx", {}).get("error") or unparsed["msg"]
    try:
        message = json.loads(line)  # Python's parser takes what the SDK's refused?
    except (ValueError, RecursionError):
        return _error(None, PARSE_ERROR, "Parse error", f"not JSON: {reason}")
    if _lone_surrogate(message):
        reason = "a string holds an escaped lone surrogate (\\ud800-\\udfff unpaired)"
    detail = f"not JSON this server reads: {reason}"
    if not isinstance(message, dict) or "id" not in message:
        if isinstance(message, dict) and "method" in message:
            return None  # a notification: never answered
        return _error(None, PARSE_ERROR, "Parse error", detail)
    if "method" not in message:
        return None  # a response: never answered
    return _error(_echoed_id(message["id"]), PARSE_ERROR, "Parse error", detail)


def _answer_to_bad_id(item: object, line: str) -> JSONRPCError | None:
    """The answer to ``line`` when it is a request whose id is neither a string nor an
    integer (which the SDK read as ``item``, a notification without the id), else None.
    MCP takes a request's id as a string or an integer, never null (the specification's
    "Messages" page); JSON-RPC 2.0 (section 4) allows a string, a number or null, and
    answers an invalid request -32600 with the request's id if it can be told, else
    null. So: -32600 "Invalid Request", with the id as sent when it is a number (``3.5``,
    ``3.0``: a JSON-RPC id, the client can match the answer to it), with id null
    otherwise (``null``, ``true``, an array, an object). O(length of the line), only for
    the items the SDK read as notifications."""
    if not isinstance(item, SessionMessage) or not isinstance(item.message, JSONRPCNotification):
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if (
        not isinstance(message, dict)
        or "id" not in message
        or message.get("method") != item.message.method  # not the line of this item
    ):
        return None
    ident = message["id"]
    detail = f"a request's id must be a string or an integer, not {_json_kind(ident)}"
    return _error(_echoed_id(ident), INVALID_REQUEST, "Invalid Request", detail)


def _echoed_id(ident: object) -> int | float | str | None:
    """The id an answer to a request with id ``ident`` (parsed JSON) carries: the same
    when it is a JSON-RPC id (a string, a finite number), else null (JSON-RPC 2.0: the
    id could not be told)."""
    if isinstance(ident, bool) or not isinstance(ident, int | float | str):
        return None
    if isinstance(ident, float) and not math.isfinite(ident):
        return None  # 1e999: not a number JSON can write back
    return ident


def _json_kind(value: object) -> str:
    """How a JSON value of ``value``'s type is named in an error's text."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, float):
        return "a number with a fraction or an exponent"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _lone_surrogate(value: object) -> bool:
    """Whether ``value`` (parsed JSON) holds a string that is not Unicode text."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except RecursionError:  # nested just under the limit json.loads took (review25b)
        return False
    return False


class _NumberIdError(JSONRPCError):
    """A JSON-RPC error answer whose id is a number with a fraction (the SDK's type
    takes a string, an integer or null)."""

    id: int | float | str | None  # type: ignore[assignment]


def _error(ident: int | float | str | None, code: int, message: str, data: str) -> JSONRPCError:
    error = ErrorData(code=code, message=message, data=data)
    if isinstance(ident, float):
        return _NumberIdError(jsonrpc="2.0", id=ident, error=error)
    return JSONRPCError(jsonrpc="2.0", id=ident, error=error)


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


def _check_grace(grace: object, name: str = "grace") -> None:
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
        raise ValueError(f"{name} must be a number of seconds >= 0, got {grace!r}")


async def serve_streams(
    server: MCPServer, read_stream: Any, write_stream: Any, *, grace: float = EOF_GRACE
) -> None:
    """Serve ``server`` over the SDK's stream pair until ``read_stream`` ends, then
    answer every request already read before returning, waiting ``grace`` seconds at
    most (a float >= 0, ``math.inf`` for no bound); the calls still running then are
    cancelled by the SDK (answered "Connection closed"). A cancellation (Ctrl-C) ends
    the wait at once. O(1) per message on top of the SDK's work.

    Unlike :func:`serve_stdio`, a request whose id is neither a string nor an integer
    (``3.5``, ``true``, ``null``) is not answered -32600 here: the SDK's transports parse
    each message before it reaches ``read_stream`` and read such a request as a
    notification, dropping its id (a ``JSONRPCNotification`` keeps no trace of it), so
    nothing that arrives tells it from a notification. :func:`serve_stdio` answers it
    from the raw line it read itself.

    Raises:
        ValueError: ``grace`` is negative or not a number.
    """
    _check_grace(grace)
    await _serve_streams(server, read_stream, write_stream, float(grace), None)


async def _serve_streams(
    server: MCPServer,
    read_stream: Any,
    write_stream: Any,
    grace: float,
    lines: collections.deque[str] | None,
) -> None:
    unanswered = _Unanswered()
    lowlevel = server._lowlevel_server  # what the SDK's own run_stdio_async drives
    await lowlevel.run(
        _HeldEnd(read_stream, unanswered, grace, write_stream, lines),
        _Answers(write_stream, unanswered),
        lowlevel.create_initialization_options(),
    )


async def serve_stdio(
    server: MCPServer, *, grace: float = EOF_GRACE, flush_grace: float = FLUSH_GRACE
) -> None:
    """``server.run_stdio_async()``, except that closing stdin does not cut the
    requests in flight: they are finished and answered first (:func:`serve_streams`;
    ``grace`` seconds at most), and that a cancellation ends it at once while stdin is
    still open, leaving no read of stdin behind (:class:`_PolledLines`: a later
    ``serve_stdio`` in the same process reads the client's next lines, and an asyncio
    program can exit). Runs under trio or asyncio.

    A cancellation does not lose an answer already made (a ``remember`` whose store
    committed, the answer to ``initialize``): every answer the server sent before it is
    written to stdout in full before the cancellation goes on (:class:`_StdoutAnswers`),
    for ``flush_grace`` seconds at most (a float >= 0, ``math.inf`` for no bound) when
    the client does not read its stdout; what is unwritten then is dropped. Nothing
    is read from stdin once cancelled. The calls still running at the cancellation are
    cancelled; the SDK answers each of them JSON-RPC error -32000 "Connection closed"
    (written as the answers above), unless its answer was already being written.

    Raises:
        ValueError: ``grace`` or ``flush_grace`` is negative or not a number.
        OSError: (in an exception group) a write to stdout failed: the client closed
            it (``BrokenPipeError``, when SIGPIPE is ignored, Python's default).
    """
    _check_grace(grace)
    _check_grace(flush_grace, "flush_grace")
    grace = float(grace)
    async with _stdout_answers(float(flush_grace)) as answers:
        with _stdin_lines() as stdin:
            lines = stdin.lines if isinstance(stdin, _PolledLines) else None
            if answers is None:  # the SDK's writer
                async with stdio_server(stdin=stdin) as (read_stream, write_stream):
                    await _serve_streams(server, read_stream, write_stream, grace, lines)
                return
            async with anyio.create_task_group() as serving:
                ours = answers

                async def serve() -> None:
                    # The SDK gets a stdout it never writes to (nothing is sent on its
                    # write stream, whose close ends its writer task), so that it does
                    # not claim descriptor 1 itself.
                    quiet = anyio.wrap_file(io.StringIO())
                    async with stdio_server(stdin=stdin, stdout=quiet) as (read_stream, unused):
                        async with unused:
                            await _serve_streams(server, read_stream, ours, grace, lines)
                    serving.cancel_scope.cancel()

                # Both in tasks of this group, so that what ends the serving reaches
                # every task of the SDK's at once, through the group's scope: a failed
                # write (EPIPE: the error ends the serving, as the SDK's writer's did;
                # the command exits 141), or a cancellation of the caller under asyncio
                # (task.cancel()). That one, caught first by the task that runs the
                # SDK's read loop, closed the stream its relay task was handing a line
                # to, and the relay's BrokenResourceError replaced the cancellation.
                serving.start_soon(answers.raise_failure)
                serving.start_soon(serve)


class _StdoutAnswers:
    """The answers of one :func:`serve_stdio`, written to descriptor ``fd`` (a private
    duplicate of stdout's) by one daemon thread, in the order they were sent.

    :meth:`send` encodes the message (as the SDK's writer: ``model_dump_json`` by alias,
    unset fields left out, one line, UTF-8) and appends it to the thread's buffer before
    it waits for anything: once the call is made, the answer is on its way whatever
    cancels the caller. It then waits, on the event loop, until the thread has written
    it (the thread signals each write through a pipe the loop waits on: no polling, any
    anyio backend), which keeps the SDK's back-pressure: a client that does not read
    holds the server's sends as before. :meth:`flush` (shielded, bounded) waits for
    everything sent; :meth:`finish` drops what is left and lets the thread end.

    The thread is a daemon: one blocked for ever in ``write`` on a stdout nobody reads
    does not keep the process from exiting (an anyio worker thread would, under
    asyncio); its descriptors are then left open (a closed number could be reused under
    its write). A stdout that is non-blocking (``O_NONBLOCK`` on its file description)
    is waited on (``poll``) when full, as a blocking one would block. A failed write
    (the client closed stdout: ``EPIPE``) drops the rest;
    :meth:`send` then raises ``anyio.BrokenResourceError``, as a memory stream whose
    reader is gone. O(length of the message) per send."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._more = threading.Condition(self._lock)
        self._pending = bytearray()  # sent, not yet written
        self._sent = 0  # bytes sent in all
        self._written = 0  # bytes written in all
        self._failed: OSError | None = None
        self._closing = False
        self._writing = False  # the thread is inside os.write
        self._closed = False  # (the SDK's side) no more sends
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._pumping = False  # a task waits on the wake pipe
        self._progress = anyio.Event()  # set (and replaced) when it woke
        self._thread = threading.Thread(target=self._run, name="actormem mcp stdout", daemon=True)
        self._thread.start()

    async def send(self, item: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        line = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        data = line.encode("utf-8")
        with self._lock:
            if self._failed is not None:
                raise anyio.BrokenResourceError from self._failed
            self._pending += data
            self._sent += len(data)
            mark = self._sent
            self._more.notify()
        await self._until(mark)

    async def flush(self, bound: float) -> None:
        """Wait until everything sent is written, shielded from cancellation, for
        ``bound`` seconds at most (a write failure, or :func:`_give_up_flushing`, ends
        it too)."""
        with anyio.CancelScope(shield=True) as shielded, anyio.move_on_after(bound):
            _flushing.add(shielded)
            try:
                with contextlib.suppress(anyio.BrokenResourceError):
                    await self._until(self._sent)
            finally:
                _flushing.discard(shielded)

    def finish(self) -> bool:
        """Drop what is not written yet and let the thread end; whether it has ended
        (then its descriptors, the wake pipe's, are closed and ``fd`` may be). O(1):
        waits only for a thread that is not inside a write (it starts no other)."""
        self._closed = True
        with self._lock:
            self._closing = True
            self._pending.clear()
            self._more.notify()
            writing = self._writing
        if not writing:
            self._thread.join()
        if self._thread.is_alive():
            return False
        os.close(self._wake_r)
        os.close(self._wake_w)
        return True

    def close(self) -> None:
        self._closed = True  # (the SDK's close: no more sends; the thread goes on)

    async def aclose(self) -> None:
        self.close()
        await anyio.lowlevel.checkpoint()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def raise_failure(self) -> None:
        """Wait until a write fails, then raise its ``OSError`` (a client that closed
        stdout: ``BrokenPipeError``). Never returns otherwise."""
        try:
            await self._until(math.inf)
        except anyio.BrokenResourceError:
            raise self._failed or OSError("stdout: a write failed") from None

    async def _until(self, mark: float) -> None:
        """Until ``mark`` bytes in all are written (``anyio.BrokenResourceError`` once a
        write failed). One waiter at a time waits on the wake pipe (an event loop takes
        one waiter per descriptor), the others for the event it sets after each wake."""
        while True:
            with self._lock:
                if self._written >= mark:
                    return
                if self._failed is not None:
                    raise anyio.BrokenResourceError from self._failed
            if self._pumping:
                await self._progress.wait()
                continue
            self._pumping = True
            try:
                await anyio.wait_readable(self._wake_r)
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._wake_r, 4096):
                        pass
            finally:
                self._pumping = False
                self._progress.set()
                self._progress = anyio.Event()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closing:
                    self._more.wait()
                if not self._pending:
                    return
                data = bytes(self._pending)
                self._writing = True
            try:
                done = os.write(self._fd, data)
            except BlockingIOError:
                # stdout's file description is non-blocking (O_NONBLOCK, set by the
                # client or by another process sharing it) and full: wait until it takes
                # more (still "writing": finish() does not wait for a client that never
                # reads), then take what is pending again (finish() may have dropped it).
                _wait_writable(self._fd)
                with self._lock:
                    self._writing = False
                continue
            except OSError as exc:
                with self._lock:
                    self._failed = exc
                    self._pending.clear()
                    self._writing = False
                self._wake()
                return
            with self._lock:
                self._writing = False
                # (close() may have cleared the buffer meanwhile: nothing to drop then)
                del self._pending[: min(done, len(self._pending))]
                self._written += done
            self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: already signalled
            os.write(self._wake_w, b"w")


def _wait_writable(fd: int) -> None:
    """Block until descriptor ``fd`` takes a write (or has an error or hang-up, which
    the next write reports). Any descriptor number (``poll``, not ``select``)."""
    import select

    waiter = select.poll()
    waiter.register(fd, select.POLLOUT)
    waiter.poll()


#: The private duplicate of stdout that a :func:`serve_stdio` writes to now (one at most).
_serving_stdout: set[int] = set()

#: The shielded waits of :meth:`_StdoutAnswers.flush` under way in this process.
_flushing: set[anyio.CancelScope] = set()


def _give_up_flushing() -> None:
    """End the waits of cancelled servings for their answers to be written at once
    (``actormem mcp``'s second signal: give up now, not after :data:`FLUSH_GRACE`).
    Call it on the event loop's thread. O(servings flushing)."""
    for scope in list(_flushing):
        scope.cancel()


@contextlib.asynccontextmanager
async def _stdout_answers(flush_grace: float) -> AsyncIterator[_StdoutAnswers | None]:
    """:class:`_StdoutAnswers` over a private duplicate of descriptor 1, which points at
    stderr meanwhile (the SDK's claim does the same: a handler's or a child's stray
    output misses the wire) and is restored on exit, after the answers sent were
    written (:meth:`_StdoutAnswers.flush`, ``flush_grace`` seconds at most, shielded:
    on a cancellation too). None (the SDK's writer) when :data:`_WRITE_STDOUT` is off,
    ``sys.stdout`` is not descriptor 1, or on Windows.

    Raises:
        RuntimeError: another :func:`serve_stdio` of this process serves stdout now (its
            answers would go to stderr; the SDK's own claim refuses a second one too).
    """
    wire = None
    if _WRITE_STDOUT and sys.platform != "win32" and _is_fd(sys.stdout, 1):
        if _serving_stdout:
            raise RuntimeError("another serve_stdio() in this process is serving stdout")
        wire = _claim(1, _stderr_or_null)
    if wire is None:
        yield None
        return
    try:
        answers = _StdoutAnswers(wire)
    except BaseException:
        os.dup2(wire, 1)
        os.close(wire)
        raise
    _serving_stdout.add(wire)
    try:
        yield answers
    finally:
        try:
            await answers.flush(flush_grace)
        finally:
            ended = answers.finish()
            os.dup2(wire, 1)
            _serving_stdout.discard(wire)
            if ended:
                os.close(wire)


#: Bytes :class:`_PolledLines` asks ``os.read`` for at a time.
_READ_SIZE = 65536

#: What a cancelled :class:`_PolledLines` had read and not handed out (the rest of a
#: line, the lines after it), by the identity of the file it read (``st_dev``,
#: ``st_ino``): the next :func:`serve_stdio` on the same stdin starts with it, so that
#: no byte the client wrote is lost between two servings.
_unread: dict[tuple[int, int], bytes] = {}


class _PolledLines(anyio.AsyncFile[str]):
    """The lines of descriptor ``fd``, read on the event loop: the loop's readiness
    wait (``anyio.wait_readable``: epoll under trio and asyncio alike), then one
    ``os.read`` of what is there, which does not block. A cancellation interrupts only
    the wait, so nothing is read after it (an abandoned thread would take the client's
    next lines, and keeps an asyncio program alive). A file the loop cannot wait on (a
    regular file, ``/dev/null``: their reads never wait for a writer) is read in a
    worker thread that a cancellation waits for.

    Lines split at ``\\n`` only (MCP's stdio framing), decoded as UTF-8 with U+FFFD
    for invalid bytes (as the SDK's own reader); whitespace-only lines are skipped (the
    SDK answers nothing to them). Each line handed out is also appended to
    :attr:`lines` (for :func:`_answer_to_bad_id`). O(length) per line."""

    def __init__(self, fd: int, start: bytes = b"") -> None:
        super().__init__(io.StringIO())  # (anyio's file, unused: every read is here)
        self._fd = fd
        self._buffer = bytearray(start)
        self._scanned = 0  # the buffer's first bytes known to hold no newline
        self._eof = False
        self._pollable = True
        self.lines: collections.deque[str] = collections.deque()

    def unread(self) -> bytes:
        """The bytes read and not handed out (empty after the end of the input)."""
        return b"" if self._eof else bytes(self._buffer)

    async def readline(self) -> str:
        await anyio.lowlevel.checkpoint()
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                raw = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                self._scanned = 0
            elif self._eof:
                if not self._buffer:
                    return ""
                raw = bytes(self._buffer)  # the last line, without its newline
                self._buffer.clear()
            else:
                self._scanned = len(self._buffer)
                await self._fill()
                continue
            if raw.isspace():
                continue
            line = raw.decode("utf-8", errors="replace")
            self.lines.append(line)
            return line

    async def _fill(self) -> None:
        if self._pollable:
            try:
                await anyio.wait_readable(self._fd)
            except PermissionError:  # EPERM: epoll takes no regular file nor /dev/null
                self._pollable = False
        try:
            if self._pollable:
                chunk = os.read(self._fd, _READ_SIZE)
            else:
                chunk = await anyio.to_thread.run_sync(os.read, self._fd, _READ_SIZE)
        except BlockingIOError:  # O_NONBLOCK set on the pipe by another, and emptied
            return
        if chunk:
            self._buffer += chunk
        else:
            self._eof = True


class _AbandonedLines(anyio.AsyncFile[str]):
    """A text file whose lines are read in a worker thread that a cancellation abandons
    (anyio's ``AsyncFile`` waits for the thread: a read of a pipe no one writes to
    never ends). The abandoned read goes on in its thread until a line or the end
    comes, or the process exits."""

    async def readline(self) -> str:
        line: str = await anyio.to_thread.run_sync(
            self._fp.readline, abandon_on_cancel=True, limiter=self.limiter
        )
        return line


@contextlib.contextmanager
def _stdin_lines() -> Iterator[anyio.AsyncFile[str] | None]:
    """stdin for the SDK's ``stdio_server``: :class:`_PolledLines` (or, with
    :data:`_POLL_STDIN` off, :class:`_AbandonedLines`) over a private duplicate of
    descriptor 0, which points at the null device meanwhile (as the SDK's own claim of
    stdin does: a handler or a child reads no protocol bytes) and is restored on exit.
    None (the SDK reads stdin itself) when both knobs are off, ``sys.stdin`` is not
    descriptor 0, or on Windows. O(1) (and the bytes a cancelled serving read but did
    not hand out: kept for the next, :data:`_unread`).

    :class:`_PolledLines` leaves no read behind, so its duplicate is closed on exit;
    :class:`_AbandonedLines`'s is never closed: an abandoned read may still wait on it,
    and a closed number could be reused under it (the SDK leaves its own duplicate open
    too)."""
    polled = _POLL_STDIN
    wire = None
    if (polled or _ABANDON_STDIN_READ) and sys.platform != "win32" and _is_fd(sys.stdin, 0):
        wire = _claim(0, functools.partial(os.open, os.devnull, os.O_RDONLY))
    if wire is None:
        yield None
        return
    try:
        if not polled:
            text = io.TextIOWrapper(
                os.fdopen(wire, "rb", closefd=False), encoding="utf-8", errors="replace"
            )
            yield _AbandonedLines(text)
            return
        wire_stat = os.fstat(wire)
        key = (wire_stat.st_dev, wire_stat.st_ino)
        reader = _PolledLines(wire, _unread.pop(key, b""))
        try:
            yield reader
        finally:
            left = reader.unread()
            if left:
                _unread[key] = left
    finally:
        os.dup2(wire, 0)
        if polled:
            os.close(wire)


def _claim(fd: int, diversion: Callable[[], int]) -> int | None:
    """A private duplicate of descriptor ``fd`` (numbered 3 or more, closed on exec),
    with ``fd`` itself pointed meanwhile at the descriptor ``diversion()`` opens (and
    this closes); None, and ``fd`` untouched, when no duplicate can be made. The caller
    puts the duplicate back with ``os.dup2(wire, fd)``. POSIX only; O(1)."""
    import fcntl

    try:
        wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        return None
    try:
        stand_in = diversion()
    except BaseException:
        os.close(wire)
        raise
    try:
        os.dup2(stand_in, fd)
    finally:
        os.close(stand_in)
    return wire


def _stderr_or_null() -> int:
    """A new descriptor on stderr (the null device if it has none)."""
    try:
        return os.dup(2)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)


def _is_fd(stream: Any, fd: int) -> bool:
    try:
        return bool(stream.buffer.fileno() == fd)
    except (AttributeError, OSError, ValueError):
        return False
