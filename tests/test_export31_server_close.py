"""export31: the connection ends after a streamed ``GET /v1/export`` that must close it.

Starlette (below ASGI spec 2.4; hypercorn 0.18 says 2.1) streams a body beside a task
that waits for ``http.disconnect`` and cancels the stream when it comes. hypercorn puts
that ``http.disconnect`` in the app's queue inside the app's last send, before it closes
the connection (or restarts the keep-alive idle timer) in the same send: the waiting
task cancelled that send at the close's first checkpoint. An HTTP/1.0 client, whose body
ends only at the close, waited forever (curl: all 2155010 bytes, then its timeout); an
HTTP/1.1 one saying ``Connection: close`` got the whole chunked body and a connection
left open; a kept-alive connection idle after an export never timed out. The 30 s
bounds below only keep a failure from hanging the suite; nothing here times anything.
"""

from __future__ import annotations

import json
import logging
import socket

import h11
import pytest
import trio

from actormem import Memory, MemoryCategory, MemoryEntry, open_memory
from actormem._storage.jsonl import entry_to_json
from actormem.server._run import _Config

from .serverproc import serve_port

_GUARD = 30.0  # seconds: a hang guard, not a timing assertion
_ENTRIES = 700  # three chunks of the stream (256 entries each), the last one partial

_HTTP10 = b"GET /v1/export HTTP/1.0\r\nHost: t\r\n\r\n"
_CLOSE = b"GET /v1/export HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"


def _until_eof(port: int, request: bytes) -> bytes:
    """Send ``request``; everything the server answers until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=_GUARD) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def _parse(answer: bytes, method: bytes = b"GET") -> tuple[h11.Response, bytes, bool]:
    """The response, its body and whether it ended (h11's client side reads it)."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method=method, target="/v1/export", headers=[("Host", "t")]))
    client.send(h11.EndOfMessage())
    client.receive_data(answer)
    client.receive_data(b"")  # the close: ends an HTTP/1.0 body
    response = None
    body = b""
    while True:
        event = client.next_event()
        if isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert response is not None
            return response, body, True
        else:
            assert response is not None, answer[:300]
            return response, body, False


async def _filled(memory: Memory) -> list[object]:
    entries = [
        MemoryEntry(category=MemoryCategory.FACT, memory=f"entry {i} \u00e9t\u00e9", tags=[f"t{i}"])
        for i in range(_ENTRIES)
    ]
    await memory.store_many(entries)
    return [entry_to_json(e) for e in memory.snapshot()]


def _lines(body: bytes) -> list[object]:
    assert body.endswith(b"\n")
    return [json.loads(line) for line in body.decode("utf-8").splitlines()]


@pytest.mark.parametrize("request_", [_HTTP10, _CLOSE], ids=["http1.0", "connection-close"])
async def test_an_export_that_ends_the_connection_closes_it(
    request_: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    stop = trio.Event()
    with trio.fail_after(2 * _GUARD):
        async with open_memory() as memory, trio.open_nursery() as nursery:
            expected = await _filled(memory)
            port = await serve_port(nursery, memory, stop)
            try:
                answer = await trio.to_thread.run_sync(_until_eof, port, request_)
            except TimeoutError:
                pytest.fail("the server never closed the connection after the export")
            finally:
                stop.set()
    response, body, ended = _parse(answer)
    assert ended, answer[-300:]
    assert response.status_code == 200
    headers = dict(response.headers)
    assert headers[b"x-actormem-entries"] == str(_ENTRIES).encode()
    assert headers[b"connection"] == b"close"
    assert _lines(body) == expected  # the whole export, from one snapshot
    logged = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert logged == [], [(r.name, r.getMessage(), r.exc_info) for r in logged]


async def test_a_kept_alive_connection_serves_on_after_an_export_and_times_out(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The next request on the connection is answered, and once the connection is idle
    after an export the server closes it (the keep-alive timer restarted: before the fix
    its restart was cancelled with the export's last send, so it never closed)."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(_Config, "keep_alive_timeout", 0.5)  # seconds; the test waits for it
    stop = trio.Event()

    def client(port: int) -> tuple[list[bytes], bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=_GUARD) as conn:
            reader = h11.Connection(h11.CLIENT)
            bodies: list[bytes] = []
            for target in ("/v1/export", "/v1/len", "/v1/export"):
                request = h11.Request(method="GET", target=target, headers=[("Host", "t")])
                conn.sendall(reader.send(request))
                reader.send(h11.EndOfMessage())
                body = b""
                while True:
                    event = reader.next_event()
                    if event is h11.NEED_DATA:
                        reader.receive_data(conn.recv(65536))
                    elif isinstance(event, h11.Response):
                        assert event.status_code == 200
                        assert dict(event.headers).get(b"connection") != b"close"
                    elif isinstance(event, h11.Data):
                        body += event.data
                    elif isinstance(event, h11.EndOfMessage):
                        break
                    else:
                        raise AssertionError(event)
                bodies.append(body)
                reader.start_next_cycle()
            rest = b""
            while chunk := conn.recv(65536):  # idle after the last export: the server closes
                rest += chunk
        return bodies, rest

    with trio.fail_after(2 * _GUARD):
        async with open_memory() as memory, trio.open_nursery() as nursery:
            expected = await _filled(memory)
            port = await serve_port(nursery, memory, stop)
            try:
                bodies, rest = await trio.to_thread.run_sync(client, port)
            except TimeoutError:
                pytest.fail("an idle kept-alive connection after an export was never closed")
            finally:
                stop.set()
    assert _lines(bodies[0]) == expected
    assert json.loads(bodies[1]) == {"entries": _ENTRIES}
    assert _lines(bodies[2]) == expected
    assert rest == b""
    logged = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert logged == [], [(r.name, r.getMessage(), r.exc_info) for r in logged]
