"""Review 26a: a retrieve waiting for ``min_seq`` on a server node ends when its client
goes away.

Before, the handler went on waiting for a seq that never comes (another memory's seq,
a typo, a huge number) after its client gave up, and kept the connection open: every
abandoned request left one task and one file descriptor on the server for good (300
requests with a 50 ms client timeout: 300 more open descriptors).
"""

from __future__ import annotations

import json
import socket

import trio

from actormem import open_memory
from actormem.server._run import serve_memory_http
from tests.pg import FAST


def _abandon(port: int, min_seq: int) -> bytes:
    """Send a retrieve waiting for ``min_seq``, stop sending (the client gives up), and
    return what the server sends before it closes (b"" for nothing)."""
    body = json.dumps({"query": "x", "min_seq": min_seq}).encode()
    head = (
        f"POST /v1/retrieve HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(head + body)
        sock.shutdown(socket.SHUT_WR)  # the client is gone: the server sees the end
        data = b""
        while chunk := sock.recv(65536):  # the bug: no end (socket.timeout after 20 s)
            data += chunk
        return data


async def test_a_wait_for_min_seq_ends_when_the_client_goes_away(pg_dsn: str) -> None:
    stop = trio.Event()
    async with (
        open_memory(log=pg_dsn, name="m", log_options=FAST) as memory,
        trio.open_nursery() as nursery,
    ):
        binds = await nursery.start(
            lambda task_status: serve_memory_http(
                memory, port=0, stop=stop, graceful_timeout=1.0, task_status=task_status
            )
        )
        port = int(binds[0].rsplit(":", 1)[1])
        for _ in range(3):
            answer = await trio.to_thread.run_sync(_abandon, port, 10**12)
            # Nothing was scored for a client that left. (hypercorn writes no reason
            # phrase: the check was once b"200 OK", which no answer holds.)
            assert not answer.startswith(b"HTTP/1.1 200 "), answer[:300]
        stop.set()
