"""Run the HTTP server: one memory, hypercorn's trio worker, graceful stop on a signal.

Theory of operation
-------------------
:func:`serve_http` opens the memory (:func:`~actormem.open_memory`), builds the app
(:func:`~actormem.server._app.create_app`) and serves it with ``hypercorn.trio.serve`` in
the same trio run, so request handlers are trio tasks that call the memory directly.

Stopping (``stop`` set, or SIGINT/SIGTERM when ``handle_signals``): hypercorn closes its
listening sockets, lets requests in flight finish for up to ``graceful_timeout`` seconds
(then cancels them: a cancelled store may or may not be applied, and its client got no
acknowledgement; every answer that starts once the stop began says ``Connection: close``:
:class:`_CloseWhenStopping`; a connection still open then is reset,
:func:`_reset_after_grace`, since a write to a client that stopped reading would hold
the stop for good), and returns; then the memory closes: every request already queued is
applied and answered, a durable memory commits and closes its file. Nothing acknowledged
is lost, because an acknowledgement is only sent after the owner applied (and, durable,
committed) the write.

Outside a stop, a write to a client that takes none of it for ``send_timeout`` seconds
(it stopped reading: its receive buffer and the server's send buffer are full) resets
that connection too (:func:`_reset_stalled`): the answer ends, and with it what it
held (a streamed export's snapshot, and so every record version evicted or replaced
since).
"""

from __future__ import annotations

import errno
import ipaddress
import json
import logging
import math
import numbers
import os
import signal
import socket
import struct
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, cast

import h11
import trio
from hypercorn.config import Config
from hypercorn.events import Closed, RawData
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.protocol.http_stream import HTTPStream
from hypercorn.trio import serve
from hypercorn.trio.tcp_server import TCPServer

from .._engine.lifecycle import open_memory
from .._engine.memory import Memory
from .._errors import StorageError
from .._index.scoring import Scorer
from .._storage.sqlite import Durability
from .._util import ignored_stop_signals
from .._util import read_token_file as read_token
from ._app import (
    HALF_CLOSED,
    HEADER_TOO_LARGE,
    MAX_HEADER_BYTES,
    closing_connection,
    create_app,
)
from ._defaults import DEFAULT_MAX_BODY, DEFAULT_PORT, DEFAULT_SEND_TIMEOUT
from ._feed import RemovalFeed

__all__ = [
    "DEFAULT_MAX_BODY",
    "DEFAULT_PORT",
    "DEFAULT_SEND_TIMEOUT",
    "is_loopback",
    "read_token",
    "serve_http",
    "serve_memory_http",
]


logger = logging.getLogger("actormem.server")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> str:
    return f"[{host.strip('[]')}]:{port}" if ":" in host.strip("[]") else f"{host}:{port}"


async def serve_http(
    *,
    path: str | os.PathLike[str] | None = None,
    durability: Durability | str = Durability.NORMAL,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    capacity: int | None = None,
    scorer: Scorer | None = None,
    log: str | None = None,
    name: str | None = None,
    token: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    graceful_timeout: float = 5.0,
    send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
    handle_signals: bool = True,
    stop: trio.Event | None = None,
    on_ready: Callable[[list[str]], Any] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve one memory over HTTP until stopped; return once it is closed.

    Args:
        path: The memory's SQLite file, or ``None`` for an in-memory one.
        durability: As :func:`~actormem.open_memory`.
        host: Address to listen on. Anything but a loopback address needs ``token``.
        port: TCP port; 0 picks a free one (the bound URLs go to ``task_status`` and
            ``on_ready``).
        capacity, scorer: As :func:`~actormem.open_memory`.
        log, name: As :func:`~actormem.open_memory`: serve one node of the replicated
            memory ``name`` over the PostgreSQL write log ``log`` (docs/replication.md).
        token: Bearer token every API call must carry, or ``None`` for none.
        max_body: Largest request body in bytes (larger: 413).
        graceful_timeout: Seconds requests in flight get to finish after a stop.
        send_timeout: Seconds a write to a client may wait for it to take any of it
            before its connection is reset (a client that stopped reading, e.g. in the
            middle of a streamed export, whose snapshot it held); None for no limit.
            Default 60.
        handle_signals: Stop on SIGINT and SIGTERM (main thread only); a SIGTERM from
            before the memory opens until it is closed (one while it opens: no serving).
        stop: Set it to stop the server (the programmatic SIGTERM); set while the memory
            opens, it closes without serving (``task_status`` gets ``[]``).
        on_ready: Called with the bound URLs once the server listens.

    Raises:
        ValueError: A non-loopback ``host`` without a token, or a bad ``max_body``,
            ``graceful_timeout`` or ``send_timeout``.
        TypeError: A ``send_timeout`` that is not a number (a bool, a str) or None.
        StorageError, TypeError, InvalidQueryError: As :func:`~actormem.open_memory`.
        OSError: The address cannot be bound (e.g. the port is in use).
        StorageError: Raised after the stop, once the memory is closed, when a commit
            failed while serving (the memory broke: from then on every call got 503,
            ``/healthz`` included). Writes acknowledged before the failure are committed.
    """
    if token is None and not is_loopback(host):
        raise ValueError(
            f"refusing to listen on {host} without a token: anyone who can reach it could "
            "read and change the memory (pass --token-file, or listen on 127.0.0.1)"
        )
    if max_body < 1:
        raise ValueError(f"max_body must be >= 1 byte, got {max_body}")
    if not (graceful_timeout >= 0 and math.isfinite(graceful_timeout)):
        raise ValueError(f"graceful_timeout must be >= 0 seconds, got {graceful_timeout}")
    _check_send_timeout(send_timeout)
    stop = stop if stop is not None else trio.Event()
    _check_bindable(host, port)  # before opening (maybe creating, loading) the file
    options: dict[str, Any] = {"path": path, "durability": durability, "capacity": capacity}
    if log is not None or name is not None:
        options.update(log=log, name=name)
    if scorer is not None:
        options["scorer"] = scorer
    feed = RemovalFeed()  # GET /v1/removals: what clients need to account for every store
    options["on_remove"] = feed
    ignored = ignored_stop_signals()  # (before any receiver of ours replaces a handler)
    async with trio.open_nursery() as opening:
        if handle_signals and signal.SIGTERM not in ignored:
            # A SIGTERM while the memory opens stops the server once it is open (SIGINT
            # interrupts the open: KeyboardInterrupt); its default action ended the
            # process (docs/server.md, "Stopping").
            await opening.start(_stop_on_sigterm, stop)
        try:
            memory = await _serve_opened(
                options, stop, handle_signals, ignored, on_ready, task_status,
                host=host, port=port, token=token, max_body=max_body,
                graceful_timeout=graceful_timeout, send_timeout=send_timeout, removals=feed,
            )  # fmt: skip
        finally:
            opening.cancel_scope.cancel()
    # Leaving open_memory: queued requests are applied, the file committed and closed.
    failure = memory.failure
    if failure is not None:
        cause = failure.reason if isinstance(failure, StorageError) else repr(failure)
        raise StorageError(
            path if path is not None else "(in memory)",
            f"the memory broke while serving ({cause}); every write acknowledged before "
            "that is committed, every one after was refused",
        ) from failure


async def _serve_opened(
    options: dict[str, Any],
    stop: trio.Event,
    handle_signals: bool,
    ignored: frozenset[int],
    on_ready: Callable[[list[str]], Any] | None,
    task_status: trio.TaskStatus[list[str]],
    **serving: Any,
) -> Memory:
    """:func:`serve_http`'s memory opened with ``options`` and served with ``serving``
    (:func:`serve_memory_http`'s arguments) until ``stop``; the memory, closed. A stop
    that came while it opened: no serving (``task_status`` gets no URL, ``on_ready``
    is not called). O(the open and the serving)."""
    async with open_memory(**options) as memory, trio.open_nursery() as nursery:
        if stop.is_set():
            task_status.started([])
            return memory
        if handle_signals:
            nursery.start_soon(_stop_on_signal, stop, ignored)

        async def run_server(task_status: trio.TaskStatus[list[str]]) -> None:
            await serve_memory_http(memory, stop=stop, task_status=task_status, **serving)
            nursery.cancel_scope.cancel()  # the signal watcher

        binds: list[str] = await nursery.start(run_server)
        if on_ready is not None:
            on_ready(binds)
        task_status.started(binds)
    return memory


async def serve_memory_http(
    memory: Memory,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    graceful_timeout: float = 5.0,
    send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
    stop: trio.Event,
    removals: RemovalFeed | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve an open ``memory`` over HTTP until ``stop`` is set (the memory stays open:
    the caller owns it). ``task_status`` gets the bound URLs. ``removals``, the memory's
    ``on_remove`` feed if it has one, serves ``GET /v1/removals``. See :func:`serve_http`
    (ValueError for a bad ``send_timeout``)."""
    _check_send_timeout(send_timeout)
    _install_connection_hooks()
    config = _Config()
    config.bind = [_bind(host, port)]
    config.graceful_timeout = graceful_timeout
    config.send_timeout = send_timeout
    config.h11_max_incomplete_size = MAX_HEADER_BYTES  # (its default; the app enforces it)
    config.accesslog = None
    config.errorlog = logger
    config.loglevel = "WARNING"
    app = _CloseWhenStopping(
        create_app(memory, token=token, max_body=max_body, removals=removals), stop
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_reset_after_grace, stop, graceful_timeout, config.connections)
        nursery.start_soon(_reset_stalled, config)
        await serve(cast(Any, app), config, shutdown_trigger=stop.wait, task_status=task_status)
        nursery.cancel_scope.cancel()  # the reset (the connections are all closed)


async def _reset_after_grace(
    stop: trio.Event, graceful_timeout: float, connections: set[trio.SocketStream]
) -> None:
    """Once ``graceful_timeout`` seconds passed after ``stop``, reset every connection
    still open (:func:`_reset`).

    At that time hypercorn (0.18, ``trio/run.py``) cancels the requests in flight, but it
    shields its socket writes from cancellation (``TCPServer.protocol_send``): a write to
    a client that stopped reading (its receive buffer full, in the middle of a streamed
    export) waited until the client read on or closed, and ``serve`` (so the memory's
    close and the process's exit) waited with it. The reset ends that write
    (``ClosedResourceError``, on which hypercorn ends the connection) and tells the client
    its answer was cut (``ECONNRESET``, where a close would end an HTTP/1.0 body as if it
    were whole). O(connections) once."""
    await stop.wait()
    await trio.sleep(graceful_timeout)
    cut = [stream for stream in connections if stream.socket.fileno() != -1]
    for stream in cut:
        _reset(stream)
    if cut:
        logger.warning(
            "actormem serve: %d connection(s) still answering after the %g s grace were reset",
            len(cut),
            graceful_timeout,
        )


def _check_send_timeout(send_timeout: float | None) -> None:
    """Refuse a ``send_timeout`` that is not None or a finite number of seconds > 0:
    TypeError for another type (a bool, a str), ValueError for a bad number (one too
    large for a float included). O(1)."""
    if send_timeout is None:
        return
    if isinstance(send_timeout, bool) or not isinstance(send_timeout, numbers.Real):
        raise TypeError(
            f"send_timeout must be a number of seconds or None, not {type(send_timeout).__name__}"
        )
    try:
        good = send_timeout > 0 and math.isfinite(send_timeout)
    except OverflowError:  # an int beyond any float
        good = False
    if not good:
        raise ValueError(f"send_timeout must be > 0 seconds or None, got {send_timeout}")


def _reset(stream: trio.SocketStream) -> None:
    """Close ``stream``'s socket with a reset (``SO_LINGER`` 0: the unsent bytes are
    dropped, the client gets ``ECONNRESET``); a task waiting to write to it or read from
    it gets ``trio.ClosedResourceError`` (trio's ``notify_closing``). O(1)."""
    try:
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:  # pragma: no cover - the socket is gone already
        pass
    stream.socket.close()


class _CloseWhenStopping:
    """ASGI middleware: a response that starts once the stop began says ``Connection:
    close``.

    hypercorn (0.18, ``protocol/h11.py``) reads no request after the stop began: once the
    answer in progress ends, ``_maybe_recycle`` closes its connection instead of starting
    the next exchange. A client keeping the connection alive sent its next request on
    it and lost it ("Server disconnected without sending a response": applied or not?
    the client cannot tell), and a connection whose client had sent that request already
    stayed parked until the graceful deadline (h11's ``PAUSED`` with the request in its
    buffer, waiting for a read permission its closing never gives): the stop took the
    full ``graceful_timeout``. With ``Connection: close`` the client sends its next
    request on a new connection (refused at once: the listener is closed; nothing was
    sent, so the client may retry it elsewhere), and h11 reads anything still on the
    connection as the end of it (``MUST_CLOSE``), so the stop waits for the answers in
    progress only. O(response header fields) a response."""

    def __init__(self, app: Any, stop: trio.Event) -> None:
        self.app = app
        self.stop = stop

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def closing(message: Any) -> None:
            await send(closing_connection(message) if self.stop.is_set() else message)

        await self.app(scope, receive, closing)


class _Config(Config):
    """hypercorn's configuration of an actormem server: its connections answer a request
    hypercorn cannot read with a problem document (:func:`_problem_answer`), a client's
    end of sending after a whole request does not end their answer
    (:func:`_protocol_handle`), :attr:`connections` holds their streams while they
    are open (:func:`_tracked_run`), and a write stalled past :attr:`send_timeout`
    resets its connection (:func:`_protocol_send`, :func:`_reset_stalled`)."""

    def __init__(self) -> None:
        super().__init__()
        #: The socket stream of every connection open on this server.
        self.connections: set[trio.SocketStream] = set()
        #: Seconds a write may wait for the client to take any of it (None: no limit).
        self.send_timeout: float | None = DEFAULT_SEND_TIMEOUT
        #: The stream of each write in progress -> trio's time of its last progress.
        self.writes: dict[trio.SocketStream, float] = {}


#: What a request hypercorn refuses before the app sees it lacked, by status.
_UNREADABLE = {
    400: "the request is not valid HTTP/1.1 (a malformed request line, header or chunked body)",
    431: HEADER_TOO_LARGE,
    501: "the request's Transfer-Encoding is not one this server reads (chunked)",
}

#: hypercorn's own answer (0.17 to 0.18 at least), kept for other servers' connections.
_bare_answer = getattr(H11Protocol, "_send_error_response", None)


async def _problem_answer(self: H11Protocol, status_code: int) -> None:
    """hypercorn's answer to a request h11 cannot parse (a malformed chunked body, a
    broken request line): on an actormem server's connection, the problem document every
    other error is (``docs/server.md``) instead of hypercorn's empty body; it closes the
    connection, as hypercorn's does. hypercorn has no hook for this answer, so its
    method is replaced (:func:`_install_problem_answers`), for :class:`_Config`'s
    connections only."""
    if not isinstance(self.config, _Config) and _bare_answer is not None:
        await _bare_answer(self, status_code)
        return
    try:
        title = HTTPStatus(status_code).phrase
    except ValueError:
        title = "Error"
    detail = _UNREADABLE.get(status_code, title)
    body = json.dumps(
        {"type": "about:blank", "title": title, "status": status_code, "detail": detail},
        separators=(",", ":"),
    ).encode()
    headers = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *self.config.response_headers("h11"),
    ]
    await self._send_h11_event(h11.Response(status_code=status_code, headers=headers))
    await self._send_h11_event(h11.Data(data=body))
    await self._send_h11_event(h11.EndOfMessage())


class _ServerConnection(h11.Connection):
    """h11's server side of one actormem connection: the bytes a client sent after a
    request that ends the connection (``Connection: close``, or HTTP/1.0) wait unread
    while that request is answered.

    h11 reads any byte after such a request as a protocol error ("Got data when
    expecting EOF"). hypercorn (0.18, ``protocol/h11.py``) asks for the next event as soon
    as bytes arrive, even while the app answers: on that error it sent its own 400 and
    closed the connection under the app's answer, whose send then met the close
    (``trio.BusyResourceError``, "Error in ASGI Framework" with a traceback; the client
    got a 400 or nothing). RFC 9112 section 9.6: the server answers the request that said
    close, then closes the connection, and processes no further request received on it.
    So while the answer is in progress this is ``PAUSED`` (as h11 pauses pipelined
    requests behind a kept-alive one, and hypercorn stops reading until its
    ``_maybe_recycle`` at the answer's end); once the answer is sent, h11's own reading
    (the protocol error, on which hypercorn closes the connection: its state is past
    ``SEND_RESPONSE``, so it sends no answer of its own). O(1), O(buffered bytes) once
    such bytes arrive (``trailing_data`` copies them)."""

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        if (
            self.their_state is h11.MUST_CLOSE
            and self.our_state in (h11.SEND_RESPONSE, h11.SEND_BODY)
            and self.trailing_data[0]
        ):
            return h11.PAUSED
        return super().next_event()


#: hypercorn's own ``H11Protocol.__init__``, kept for other servers' connections.
_bare_init = H11Protocol.__init__


def _protocol_init(self: H11Protocol, *args: Any, **kwargs: Any) -> None:
    """hypercorn's ``H11Protocol.__init__``; on an actormem server's connection
    (:class:`_Config`), its h11 connection is a :class:`_ServerConnection` (made as
    hypercorn makes it: no byte has reached it yet). hypercorn has no hook for it."""
    _bare_init(self, *args, **kwargs)
    if isinstance(self.config, _Config) and type(self.connection) is h11.Connection:
        self.connection = _ServerConnection(
            h11.SERVER, max_incomplete_event_size=self.config.h11_max_incomplete_size
        )


#: hypercorn's own ``H11Protocol.handle``, kept for other servers' connections.
_bare_handle = H11Protocol.handle

#: The attribute marking an :class:`H11Protocol` whose client ended its sending.
_HALF_CLOSED_ATTR = "_actormem_half_closed"


async def _protocol_handle(self: H11Protocol, event: Any) -> None:
    """hypercorn's ``H11Protocol.handle``; on an actormem server's connection
    (:class:`_Config`), a client's end of sending (``shutdown(SHUT_WR)``, ``nc -N``) after
    a whole request does not end the answer to it.

    hypercorn (0.18, ``trio/tcp_server.py``) reads the end (``RawData(b"")``) and then
    hands the protocol ``Closed()``, as for a connection gone: the answer's stream closes
    and the app gets ``http.disconnect``, on which a streamed answer (``GET /v1/export``)
    stopped before its first line; an HTTP/1.0 client then read a 200 with an empty body
    that looks whole. HTTP lets a client end its side once its request is sent (RFC 9112
    section 9.6 closes connections in stages). Here that ``Closed()`` is dropped and the
    app gets ``http.disconnect`` marked :data:`~actormem.server._app.HALF_CLOSED`: an
    answer waiting before it sends anything (``min_seq``) still takes it as its client's
    leaving, and a streamed answer (``_StreamedResponse``) goes on. Its sends still meet
    a client that is gone: a write that fails hands the protocol ``Closed()`` (hypercorn's
    ``protocol_send``), which ends the answer, and the app gets the plain
    ``http.disconnect``. The answer's end closes the connection (h11's ``their_state``
    is ``CLOSED``). O(1) an event."""
    if not isinstance(self.config, _Config):
        await _bare_handle(self, event)
        return
    if isinstance(event, Closed) and self.__dict__.pop(_HALF_CLOSED_ATTR, False):
        return  # the reader's, right after the end below: the answer goes on
    await _bare_handle(self, event)
    stream = self.stream
    if (
        isinstance(event, RawData)
        and not event.data
        and self.connection.their_state is h11.CLOSED  # after a whole request
        and isinstance(stream, HTTPStream)
        and not stream.closed  # its app answers
    ):
        await stream.app_put(cast(Any, {"type": "http.disconnect", HALF_CLOSED: True}))
        setattr(self, _HALF_CLOSED_ATTR, True)  # the reader's Closed() comes next


#: hypercorn's own ``TCPServer.run`` (one connection, start to end).
_bare_run = TCPServer.run


async def _tracked_run(self: TCPServer) -> None:
    """hypercorn's ``TCPServer.run``; an actormem server's connection (:class:`_Config`)
    is in its :attr:`_Config.connections` while it runs (:func:`_reset_after_grace`).
    hypercorn has no hook for the connections it accepts. O(1)."""
    connections = self.config.connections if isinstance(self.config, _Config) else None
    stream = self.stream
    if connections is None or not isinstance(stream, trio.SocketStream):
        await _bare_run(self)
        return
    connections.add(stream)
    try:
        await _bare_run(self)
    finally:
        connections.discard(stream)


#: hypercorn's own ``TCPServer.protocol_send`` (every write of one connection).
_bare_send = TCPServer.protocol_send


async def _protocol_send(self: TCPServer, event: Any) -> None:
    """hypercorn's ``TCPServer.protocol_send``; on an actormem server's connection
    (:class:`_Config` with a ``send_timeout``), each write is noted in
    :attr:`_Config.writes` with the time it last made progress (its start, and each
    socket ``send`` that took bytes: :func:`_send_noting`), for :func:`_reset_stalled`.

    hypercorn (0.18) writes with no deadline, shielded from cancellation: a client that
    stopped reading (its receive buffer full) held the answer's task, and so what the
    answer held, for as long as it kept the connection open (a streamed export's
    snapshot: every record version evicted or replaced after it stayed in memory). Its
    ``read_timeout`` bounds reads only, and its ``keep_alive_timeout`` idle connections.
    The write here is hypercorn's (the connection's send lock, the shield, ``Closed()``
    handed to the protocol when the socket is broken or closed). Anything else is
    hypercorn's. O(1) more a write than hypercorn's (a dict entry set a ``send``)."""
    config = self.config
    stream = self.stream
    if (
        not isinstance(config, _Config)
        or config.send_timeout is None
        or not isinstance(event, RawData)
        or not isinstance(stream, trio.SocketStream)
    ):
        await _bare_send(self, event)
        return
    async with self.send_lock:
        try:
            with trio.CancelScope(shield=True):  # as hypercorn's
                await _send_noting(stream, event.data, config.writes)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await self.protocol.handle(Closed())


#: What a socket error means for a stream (trio's ``SocketStream`` sorts them alike).
_CLOSED_ERRNOS = frozenset({errno.EBADF, errno.ENOTSOCK})


async def _send_noting(
    stream: trio.SocketStream, data: bytes, writes: dict[trio.SocketStream, float]
) -> None:
    """``stream.send_all(data)`` as trio makes it (a socket ``send`` of what is left
    until all is sent; an ``OSError`` raised as ``trio.BrokenResourceError``, or
    ``trio.ClosedResourceError`` for a closed socket), with ``writes[stream]`` the time
    of the write's start and then of each ``send`` that took bytes; dropped at its end.
    O(len(data)), the calls trio's makes."""
    writes[stream] = trio.current_time()
    try:
        if stream.socket.did_shutdown_SHUT_WR:
            raise trio.ClosedResourceError("can't send data after sending EOF")
        with memoryview(data) as view:
            if not view:
                await trio.lowlevel.checkpoint()
            total = 0
            while total < len(view):
                with view[total:] as remaining:
                    total += await stream.socket.send(remaining)
                writes[stream] = trio.current_time()
    except OSError as exc:
        if exc.errno in _CLOSED_ERRNOS:
            raise trio.ClosedResourceError("this socket was already closed") from None
        raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
    finally:
        writes.pop(stream, None)


async def _reset_stalled(config: _Config) -> None:
    """Every quarter of ``config.send_timeout`` (10 ms to 1 s), reset each connection
    whose write made no progress for ``send_timeout`` seconds (:attr:`_Config.writes`:
    its client took no byte), one warning logged for each: the reset
    ends the write as the stop's does (:func:`_reset_after_grace`):
    ``ClosedResourceError``, on which the protocol is handed ``Closed()``, the app gets
    ``http.disconnect`` and a streamed export stops (its snapshot released); the client
    reads ``ECONNRESET`` after the bytes that reached it, never an end. So a stalled
    write is reset ``send_timeout`` to 1.25 ``send_timeout`` seconds (1 s more at most)
    after its last progress. O(writes in progress) a round."""
    timeout = config.send_timeout
    if timeout is None:
        return
    writes = config.writes
    while True:
        await trio.sleep(min(max(timeout / 4, 0.01), 1.0))  # (a tiny timeout: no spin)
        now = trio.current_time()
        for stream, since in list(writes.items()):
            if now - since < timeout or stream.socket.fileno() == -1:
                continue
            writes.pop(stream, None)
            try:
                peer = _bind(*stream.socket.getpeername()[:2])
            except OSError:  # pragma: no cover - gone meanwhile
                peer = "a client"
            _reset(stream)
            logger.warning(
                "actormem serve: %s took none of its answer for %g s (send timeout): "
                "its connection was reset",
                peer,
                timeout,
            )


def _install_connection_hooks() -> None:
    """Make hypercorn's HTTP/1.1 connections answer unparsable requests with
    :func:`_problem_answer` (its own answer for other servers' connections), hold the
    bytes behind a request that ends the connection (:class:`_ServerConnection`), answer
    a client that ended its sending (:func:`_protocol_handle`), list the open
    connections (:func:`_tracked_run`) and note each write's progress
    (:func:`_protocol_send`).
    Idempotent; nothing for the answers on a
    hypercorn without the method (tests/test_minor28_server.py tells), and
    tests/test_stop32_server.py tells if a hook stops taking effect."""
    if _bare_answer is not None:
        H11Protocol._send_error_response = _problem_answer  # type: ignore[method-assign]
    H11Protocol.__init__ = _protocol_init  # type: ignore[method-assign]
    H11Protocol.handle = _protocol_handle  # type: ignore[method-assign]
    TCPServer.run = _tracked_run  # type: ignore[method-assign]
    TCPServer.protocol_send = _protocol_send  # type: ignore[method-assign]


def _check_bindable(host: str, port: int) -> None:
    """Raise the OSError binding ``host:port`` would raise, from a socket we close.

    hypercorn leaves the socket of a failed bind open; trying first keeps that from
    happening in the common case (the port is taken) and fails before the memory opens.
    """
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((bare, port))


async def _stop_on_sigterm(
    stop: trio.Event, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Set ``stop`` on SIGTERM, from the time it started (``task_status``) until
    cancelled: while the memory opens, and then beside :func:`_stop_on_signal`."""
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            if not stop.is_set():
                logger.warning("actormem serve: SIGTERM received, stopping")
                stop.set()


async def _stop_on_signal(stop: trio.Event, ignored: frozenset[int]) -> None:
    # A signal ignored when the server started (``actormem serve &`` in a script: SIGINT
    # ignored, so a Ctrl-C meant for the foreground leaves it alone) stays ignored:
    # ``ignored``, read before any receiver replaced the handlers.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            if signum in ignored:
                continue
            logger.warning("actormem serve: %s received, stopping", signal.Signals(signum).name)
            stop.set()
