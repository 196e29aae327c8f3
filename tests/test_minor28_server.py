"""minor28: two requests the server could not read answered unlike its other errors.

* A JSON body nested past the parser's depth (about 1,000 levels: Python's recursion
  limit) was refused "body: not a JSON document in UTF-8", though it is one; the 422
  now says it is nested too deep and names the depth a value may have (64).
* A request hypercorn cannot parse (a malformed chunked body, a broken request line)
  got hypercorn's own 400 with an empty body, where every other error of the server is
  a problem document (docs/server.md "Errors"); it is one now too.
"""

from __future__ import annotations

import json

import httpx
import pytest
import trio

from actormem import open_memory
from actormem._json import MAX_VALUE_DEPTH
from actormem.server._app import create_app

from .serverproc import exchange, serve_port


@pytest.mark.parametrize("route", ["/v1/entries", "/v1/retrieve"])
async def test_a_body_nested_past_the_parser_names_the_nesting_limit(route: str) -> None:
    deep = "[" * 50_000 + "]" * 50_000  # past 3.13's json depth too (it takes 5,000)
    body = f'{{"category":"fact","memory":"m","query":"q","payload":{{"a":{deep}}}}}'
    async with open_memory() as memory:
        transport = httpx.ASGITransport(app=create_app(memory))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.post(
                route, content=body, headers={"content-type": "application/json"}
            )
        assert answer.status_code == 422
        assert answer.headers["content-type"] == "application/problem+json"
        problem = answer.json()
        assert problem["field"] == "body"
        assert "nested too deep" in problem["detail"]
        assert f"{MAX_VALUE_DEPTH} levels" in problem["detail"]
        assert len(memory) == 0


_CHUNKED = (
    b"POST /v1/entries HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
)
_BAD_LINE = b"POST /v1/entries HTTP/1.1 extra\r\nHost: t\r\n\r\n"


@pytest.mark.parametrize("request_bytes", [_CHUNKED, _BAD_LINE], ids=["chunk", "line"])
async def test_an_unparsable_request_gets_a_problem_document(request_bytes: bytes) -> None:
    stop = trio.Event()
    async with open_memory() as memory, trio.open_nursery() as nursery:
        port = await serve_port(nursery, memory, stop)
        answer = await trio.to_thread.run_sync(exchange, port, request_bytes)
        stop.set()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), answer
        assert b"content-type: application/problem+json" in head.lower(), answer
        assert b"connection: close" in head.lower(), answer
        problem = json.loads(body)
        assert problem["status"] == 400
        assert problem["title"] == "Bad Request"
        assert "not valid HTTP/1.1" in problem["detail"]
        assert len(memory) == 0
