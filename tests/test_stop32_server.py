"""stop32: a streamed ``GET /v1/export`` and the stop, and a client that ends its sending.

1. A client that stopped reading in the middle of an export (its receive buffer full)
   held up ``actormem serve``'s stop for good: hypercorn (0.18) shields its socket
   writes from cancellation, so the write waited for that client past the 5 s grace,
   and the memory's close, the ``stopped`` line and the exit waited with it. Now the
   connections still open once the grace is over are reset: the process ends (exit 0),
   and the client reads ``ECONNRESET``, never a cut body that looks whole.
2. A client that half-closed its side (``shutdown(SHUT_WR)``) right after its
   ``GET /v1/export`` was taken as gone: the export stopped before its first line, and
   an HTTP/1.0 client read a 200 with an empty body that looks complete. HTTP lets a
   client end its sending once its request is sent; the export is now sent whole, and a
   client that really leaves still ends it.

The 30 s bounds only keep a failure from hanging the suite; nothing here times anything.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
import trio
from hypercorn.trio.tcp_server import TCPServer

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem.server import _app
from actormem.server._run import _Config

from .serverproc import ServerProcess, serve_port
from .test_export31_server_close import _parse

_GUARD = 30.0  # seconds: a hang guard, not a timing assertion
_HTTP10 = b"GET /v1/export HTTP/1.0\r\nHost: t\r\n\r\n"
_HTTP11 = b"GET /v1/export HTTP/1.1\r\nHost: t\r\n\r\n"
_REQUESTS = pytest.mark.parametrize("request_", [_HTTP10, _HTTP11], ids=["http1.0", "http1.1"])
_TEXT = 4000  # characters of each entry's text: about 4 KB of export a line


def _socket_buffer_max() -> int:
    """The most bytes a socket's send buffer grows to (Linux's ``tcp_wmem`` maximum)."""
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        return 4 << 20


async def _fill(path: Path, count: int) -> None:
    async with open_memory(path=path) as memory:
        for start in range(0, count, 500):
            await memory.store_many(
                [
                    MemoryEntry(category=MemoryCategory.FACT, memory=f"entry {i} " + "x" * _TEXT)
                    for i in range(start, min(count, start + 500))
                ]
            )


def _head(conn: socket.socket) -> bytes:
    """Read until the end of the answer's header; the header and what followed it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        assert chunk, data
        data += chunk
    return data


def _stop(srv: ServerProcess) -> tuple[int, str, str]:
    """SIGTERM, and the exit status, the rest of stdout and stderr once it exits."""
    try:
        return srv.stop(timeout=_GUARD)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the stop hung on a client that stopped reading:\n{srv.stderr()}")


@_REQUESTS
def test_a_stop_resets_an_export_whose_client_stopped_reading(
    request_: bytes, tmp_path: Path
) -> None:
    db = tmp_path / "big.db"
    # Far more than the server's send buffer and the client's receive buffer hold: the
    # server's write waits for this client, which reads the header and then nothing.
    count = 4 * max(_socket_buffer_max(), 4 << 20) // _TEXT
    trio.run(_fill, db, count)
    with ServerProcess("--path", str(db)) as srv:
        host, port = srv.url.removeprefix("http://").rsplit(":", 1)
        with socket.socket() as conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            conn.settimeout(_GUARD)
            conn.connect((host, int(port)))
            conn.sendall(request_)
            assert _head(conn).startswith(b"HTTP/1.1 200 ")
            status, out, err = _stop(srv)  # the client still reads nothing
            assert status == 0, err
            assert "actormem serve: stopped; the memory is committed and closed" in out
            assert "1 connection(s) still answering after the 5 s grace were reset" in err
            with pytest.raises(ConnectionResetError):  # not an end: the answer was cut
                _read_all(conn)


def _read_all(conn: socket.socket) -> bytes:
    answer = b""
    while chunk := conn.recv(65536):
        answer += chunk
    return answer


def test_an_export_whose_client_ended_its_sending_is_sent_whole(tmp_path: Path) -> None:
    db = tmp_path / "small.db"
    count = 700  # three chunks of the stream (256 entries each), the last one partial
    trio.run(_fill, db, count)
    with ServerProcess("--path", str(db)) as srv:
        host, port = srv.url.removeprefix("http://").rsplit(":", 1)
        for request in (_HTTP10, _HTTP11):
            with socket.create_connection((host, int(port)), timeout=_GUARD) as conn:
                conn.sendall(request)
                conn.shutdown(socket.SHUT_WR)  # `nc -N`: the request is all there is
                answer = _read_all(conn)
            response, body, ended = _parse(answer)
            assert response.status_code == 200
            assert ended, answer[-300:]
            lines = [json.loads(line) for line in body.decode().splitlines()]
            assert sorted(line["memory"].split()[1] for line in lines) == sorted(
                str(i) for i in range(count)
            ), (request, len(lines))
        status, out, err = _stop(srv)
    assert status == 0, err
    assert "stopped; the memory is committed and closed" in out


class _Watched(set[trio.SocketStream]):
    """A server's :attr:`_Config.connections` that tells when it is empty again."""

    def __init__(self) -> None:
        super().__init__()
        self.emptied = trio.Event()

    def discard(self, stream: trio.SocketStream) -> None:
        super().discard(stream)
        if not self:
            self.emptied.set()


def export_request(port: int) -> socket.socket:
    """A connection to the loopback ``port`` with a small receive buffer (4 KB), its
    ``GET /v1/export`` (HTTP/1.1) sent."""
    conn = socket.socket()
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        conn.settimeout(_GUARD)
        conn.connect(("127.0.0.1", port))
        conn.sendall(_HTTP11)
    except BaseException:
        conn.close()
        raise
    return conn


def count_exported(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-element list counting the entries exports turn into JSON from now on."""
    exported = [0]
    real = _app.entry_to_json

    def counted(entry: object) -> object:
        exported[0] += 1
        return real(entry)  # type: ignore[arg-type]

    monkeypatch.setattr(_app, "entry_to_json", counted)
    return exported


def _keep_configs(monkeypatch: pytest.MonkeyPatch) -> list[_Config]:
    """The servers' hypercorn configurations made from now on, with watched connections."""
    configs: list[_Config] = []
    real_init = _Config.__init__

    def kept(self: _Config) -> None:
        real_init(self)
        self.connections = _Watched()
        configs.append(self)

    monkeypatch.setattr(_Config, "__init__", kept)
    return configs


async def test_a_client_that_leaves_after_ending_its_sending_ends_the_export(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its end of sending is not taken as its leaving, but its leaving still is: the
    export stops once a write to it fails, long before its last entry."""
    count = 8_000  # about 32 MB of export: far more than the socket buffers hold
    exported = count_exported(monkeypatch)
    configs = _keep_configs(monkeypatch)

    def leave(port: int) -> None:
        with export_request(port) as conn:
            conn.shutdown(socket.SHUT_WR)
            assert _head(conn).startswith(b"HTTP/1.1 200 ")
        # closed with unread bytes: a reset, so the server's next write fails

    stop = trio.Event()
    with trio.fail_after(2 * _GUARD):
        async with open_memory() as memory, trio.open_nursery() as nursery:
            for start in range(0, count, 1000):
                await memory.store_many(
                    [
                        MemoryEntry(category=MemoryCategory.FACT, memory=f"e {i} " + "y" * _TEXT)
                        for i in range(start, start + 1000)
                    ]
                )
            port = await serve_port(nursery, memory, stop)
            (config,) = configs
            assert isinstance(config.connections, _Watched)
            await trio.to_thread.run_sync(leave, port)
            await config.connections.emptied.wait()  # the connection ends with no stop
            stop.set()
    assert 0 < exported[0] < count


async def test_the_hooks_hypercorn_lacks_take_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the fixes above rely on in hypercorn (0.18) holds: each connection's
    ``TCPServer.run`` goes through the hook that lists it (the stop resets what is still
    listed after the grace), and the h11 protocol's ``handle`` through the one that keeps
    an answer to a client that ended its sending. If hypercorn renames or stops calling
    them, this says so before a stop hangs."""
    from hypercorn.protocol.h11 import H11Protocol

    from actormem.server._run import _protocol_handle, _tracked_run

    configs = _keep_configs(monkeypatch)
    stop = trio.Event()
    with trio.fail_after(_GUARD):
        async with open_memory() as memory, trio.open_nursery() as nursery:
            port = await serve_port(nursery, memory, stop)
            assert TCPServer.run is _tracked_run
            assert H11Protocol.handle is _protocol_handle
            (config,) = configs
            assert isinstance(config.connections, _Watched)
            conn = trio.socket.socket()
            await conn.connect(("127.0.0.1", port))
            await conn.send(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            assert (await conn.recv(4096)).startswith(b"HTTP/1.1 200 ")
            (listed,) = config.connections
            assert isinstance(listed, trio.SocketStream)
            assert listed.socket.getpeername() == conn.getsockname()
            conn.close()
            await config.connections.emptied.wait()  # it ends with its connection
            stop.set()
