"""review30a: the server's request limits and the fields its 422s name.

1. docs/server.md: a header over 16 KiB gets 431; a 20,000-byte header got 200 (100 KB
   got 431). hypercorn (h11) refuses only a header still incomplete once 16 KiB are
   buffered, and reads 64 KiB at a time: one arriving whole got through. The app now
   applies the 16 KiB to every request.
"""

from __future__ import annotations

import json

import httpx
import pytest
import trio

from actormem import open_memory
from actormem._entry import MAX_TAGS
from actormem.server._app import MAX_HEADER_BYTES, create_app, header_size

from .serverproc import exchange, serve_port


def _request(size: int) -> bytes:
    start = b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-Big: "
    end = b"\r\n\r\n"
    request = start + b"a" * (size - len(start) - len(end)) + end
    assert len(request) == size
    return request


async def test_a_header_over_16_kib_gets_431_even_when_it_arrives_whole() -> None:
    stop = trio.Event()
    async with open_memory() as memory, trio.open_nursery() as nursery:
        port = await serve_port(nursery, memory, stop)
        at_limit = await trio.to_thread.run_sync(exchange, port, _request(MAX_HEADER_BYTES))
        over = await trio.to_thread.run_sync(exchange, port, _request(20_000))
        stop.set()
    assert at_limit.startswith(b"HTTP/1.1 200"), at_limit[:200]
    head, _, body = over.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431"), over[:200]
    assert b"connection: close" in head.lower()
    assert json.loads(body) == {
        "type": "about:blank",
        "title": "Request Header Fields Too Large",
        "status": 431,
        "detail": "the request's header is too large",
    }


def test_the_size_counted_is_the_header_as_sent() -> None:
    """The request line (with its query) and every field, each with its CRLF."""
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/healthz",
        "raw_path": b"/healthz",
        "query_string": b"q=1",
        "headers": [(b"host", b"t"), (b"x-big", b"abc")],
    }
    sent = b"GET /healthz?q=1 HTTP/1.1\r\nhost: t\r\nx-big: abc\r\n\r\n"
    assert header_size(scope) == len(sent)


async def _post(path: str, content: str) -> httpx.Response:
    async with open_memory() as memory:
        transport = httpx.ASGITransport(app=create_app(memory))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post(
                path, content=content, headers={"content-type": "application/json"}
            )


_TOO_MANY_TAGS = json.dumps([f"t{i}" for i in range(MAX_TAGS + 1)])
_EARLY = '"0001-01-01T00:00:00+01:00"'


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/entries", f'{{"category": "fact", "memory": "x", "tags": {_TOO_MANY_TAGS}}}', "tags"),
        (
            "/v1/entries",
            f'{{"category": "fact", "memory": "x", "created_at": {_EARLY}}}',
            "created_at",
        ),
        (
            "/v1/batch",
            f'{{"entries": [{{"category": "fact", "memory": "x"}}, '
            f'{{"category": "fact", "memory": "x", "created_at": {_EARLY}}}]}}',
            "entries[1].created_at",
        ),
    ],
    ids=["tags", "created_at", "batch"],
)
async def test_a_refused_entry_names_the_field_at_fault(path: str, body: str, field: str) -> None:
    """They named ``"field": "body"`` (or ``entries[1]``) though one field was at fault."""
    answer = await _post(path, body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == field
    assert answer.json()["detail"].startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("literal", "said"), [("NaN", "NaN is not JSON"), ("Infinity", "Infinity is not JSON")]
)
async def test_a_literal_nan_is_said_to_be_no_json(literal: str, said: str) -> None:
    """It was "numbers must be finite (a JSON number too large for a double)"."""
    answer = await _post(
        "/v1/entries", f'{{"category": "fact", "memory": "x", "value": {{"a": {literal}}}}}'
    )
    assert answer.status_code == 422, answer.text
    assert said in answer.json()["detail"]
    assert answer.json()["field"].startswith("value")
