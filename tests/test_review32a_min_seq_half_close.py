"""review32a: a ``min_seq`` retrieve from a client that ended its sending.

``POST /v1/retrieve`` (and ``retrieve_scored``) with ``min_seq`` watches the request's
receive channel for ``http.disconnect`` while it waits for the seq, and answers
``{"entries": []}`` once it saw one ("nobody reads this answer"). A client that ends
its sending after its whole request (``shutdown(SHUT_WR)``, ``nc -N``, HTTP/1.0
scripts) gets an ``http.disconnect`` marked ``HALF_CLOSED`` (stop32), yet it still reads
the answer: about one such retrieve in two read a 200 with no entries, which looks like
a true answer (nothing matched), even on a memory that is not replicated, where the seq
is applied at once. The watch now takes only a client that is gone as gone."""

from __future__ import annotations

import json
import socket

import trio

from actormem import MemoryCategory, MemoryEntry, open_memory

from .serverproc import serve_port

_TRIES = 30  # each one read an empty answer about half the time before the fix


def _retrieve_half_closed(port: int, route: str, body: bytes) -> dict[str, object]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(
            f"POST {route} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        conn.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), answer[:300]
    result: dict[str, object] = json.loads(payload)
    return result


async def test_a_min_seq_retrieve_answers_a_client_that_ended_its_sending() -> None:
    stop = trio.Event()
    async with open_memory() as memory, trio.open_nursery() as nursery:
        seq = await memory.store(MemoryEntry.new(MemoryCategory.FACT, "deploys go to blue"))
        port = await serve_port(nursery, memory, stop)
        for route, key in (("/v1/retrieve", "entries"), ("/v1/retrieve_scored", "results")):
            for min_seq in (0, seq or 0):
                body = json.dumps({"query": "deploys", "limit": 3, "min_seq": min_seq}).encode()
                for _ in range(_TRIES):
                    result = await trio.to_thread.run_sync(_retrieve_half_closed, port, route, body)
                    assert len(result[key]) == 1, (route, min_seq, result)  # type: ignore[arg-type]
        stop.set()
