"""Review 26a: the clients' ``timeout`` is for the whole call, as docs/server.md says
("Every call has ``timeout`` seconds in all").

httpx's timeout bounds each step alone (connect, each read of the socket), so a server
(or a proxy in between) that trickles its answer a byte at a time kept a call with
``timeout=1`` going for as long as it liked: here it returned the trickled answer after
about 20 s instead of raising TransportError.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import anyio
import pytest

from actormem import TransportError
from actormem.client import AsyncClient, Client

#: The trickled answer: a valid one, one byte every 0.2 s (about 20 s in all).
BODY = b'{"entries":' + b" " * 90 + b"[]}"


def _trickle(conn: socket.socket) -> None:
    with conn:
        try:
            conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(BODY))
            for byte in BODY:
                conn.sendall(bytes([byte]))
                time.sleep(0.2)
        except OSError:  # the client gave up and closed
            pass


@pytest.fixture
def trickling_url() -> Iterator[str]:
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
            threading.Thread(target=_trickle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        done.set()
        thread.join()
        server.close()


def test_sync_client_timeout_bounds_the_whole_call(trickling_url: str) -> None:
    with Client(trickling_url, timeout=1.0, retries=0) as client:
        with pytest.raises(TransportError, match="within the timeout"):
            client.retrieve("anything")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_client_timeout_bounds_the_whole_call(trickling_url: str, backend: str) -> None:
    async def main() -> None:
        async with AsyncClient(trickling_url, timeout=1.0, retries=0) as client:
            with pytest.raises(TransportError, match="within the timeout"):
                await client.retrieve("anything")

    anyio.run(main, backend=backend)
