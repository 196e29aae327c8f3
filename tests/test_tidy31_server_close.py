"""tidy31: a request pipelined behind one that says ``Connection: close``.

hypercorn (0.18) handed the bytes after such a request to h11 while the app was still
answering it; h11 reads any byte after a request that ends the connection as a protocol
error ("Got data when expecting EOF"), so hypercorn sent its 400 answer and closed the
connection under the app's own answer: the client got a 400 (or nothing), and the app's
send met hypercorn's close (``trio.BusyResourceError`` logged with a traceback, "Error in
ASGI Framework"). RFC 9112 section 9.6: the server answers the request that said close,
then closes, and processes no further request received on that connection. Now the
bytes after it wait unread (as h11's pipelining does) until the answer is sent.
"""

from __future__ import annotations

import json
import logging

import pytest
import trio

from actormem import open_memory

from .serverproc import exchange, serve_port

_CLOSE = b"GET /readyz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
_HTTP10 = b"GET /readyz HTTP/1.0\r\nHost: t\r\n\r\n"  # no keep-alive: the end of it too
_BODY = b'{"category": "fact", "memory": "sent behind a close"}'
_STORE = (
    b"POST /v1/entries HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_BODY), _BODY)
)


@pytest.mark.parametrize("first", [_CLOSE, _HTTP10], ids=["close", "http1.0"])
@pytest.mark.parametrize("slow", [True, False], ids=["slow-answer", "fast-answer"])
async def test_the_answer_to_a_close_request_is_sent_and_what_follows_ignored(
    first: bytes, slow: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    stop = trio.Event()
    answers: list[bytes] = []
    with trio.fail_after(30):
        async with open_memory() as memory, trio.open_nursery() as nursery:
            entered = trio.Event()
            release = trio.Event()
            real = memory.store_many

            async def held(entries: list[object]) -> None:  # /readyz's round trip
                entered.set()
                await release.wait()
                await real(entries)  # type: ignore[arg-type]

            if slow:
                monkeypatch.setattr(memory, "store_many", held)
            else:
                release.set()
            port = await serve_port(nursery, memory, stop)

            async def client() -> None:
                sent = first + _STORE + _STORE
                answers.append(await trio.to_thread.run_sync(exchange, port, sent))

            async with trio.open_nursery() as clients:
                clients.start_soon(client)
                if slow:
                    await entered.wait()
                    await trio.sleep(0.2)  # the pipelined bytes reach the server meanwhile
                    release.set()
            monkeypatch.undo()
            # The server keeps serving.
            again = await trio.to_thread.run_sync(exchange, port, _CLOSE)
            stop.set()
        assert len(memory) == 0  # no request behind the close was processed
    for answer in (*answers, again):
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), answer[:300]
        assert b"connection: close" in head.lower()
        assert json.loads(body) == {"status": "ready", "entries": 0}  # and nothing after it
    logged = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert logged == [], [(r.name, r.getMessage(), r.exc_info) for r in logged]
