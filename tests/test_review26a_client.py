"""Review 26a: the clients' ``timeout`` is for the whole call, as docs/server.md says
("Every call has ``timeout`` seconds in all").

httpx's timeout bounds each step alone (connect, each read of the socket), so a server
(or a proxy in between) that trickles its answer a byte at a time kept a call with
``timeout=1`` going for as long as it liked: here it returned the trickled answer after
about 20 s instead of raising TransportError.

minor28: the synchronous client bounded the body's reads by the call's deadline, but not
the header's: a server trickling its status line and header fields a byte at a time
(``head`` below: a 404 without a body, so no body read checked the time) kept ``Client``
going past its timeout all the same: ``get`` answered None after about 20 s.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator

import anyio
import pytest

from actormem import TransportError
from actormem.client import AsyncClient, Client

#: The trickled answer: a valid one, one byte every 0.2 s (about 20 s in all).
BODY = b'{"entries":' + b" " * 90 + b"[]}"


#: The trickled answer with ``head``: a 404 with no body (``get`` reads it as None), one
#: byte every 0.2 s (about 20 s in all).
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nX-Pad: " + b"p" * 60 + b"\r\nContent-Length: 0\r\n\r\n"


def _trickle(conn: socket.socket, part: str) -> None:
    with conn:
        try:
            conn.recv(65536)
            slow = BODY
            if part == "head":
                slow = NOT_FOUND
            else:
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(BODY))
            for byte in slow:
                conn.sendall(bytes([byte]))
                time.sleep(0.2)
        except OSError:  # the client gave up and closed
            pass


@pytest.fixture(params=["body", "head"])
def trickling(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(the URL of a server trickling its answers, which part it trickles)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_trickle, args=(conn, request.param), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", request.param
    finally:
        done.set()
        thread.join()
        server.close()


def test_sync_client_timeout_bounds_the_whole_call(trickling: tuple[str, str]) -> None:
    url, part = trickling
    with Client(url, timeout=1.0, retries=0) as client:
        with pytest.raises(TransportError, match="within the timeout"):
            client.get(uuid.uuid4()) if part == "head" else client.retrieve("anything")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_client_timeout_bounds_the_whole_call(
    trickling: tuple[str, str], backend: str
) -> None:
    url, part = trickling

    async def main() -> None:
        async with AsyncClient(url, timeout=1.0, retries=0) as client:
            asked = client.get(uuid.uuid4()) if part == "head" else client.retrieve("x")
            with pytest.raises(TransportError, match="within the timeout"):
                await asked

    anyio.run(main, backend=backend)
