"""minor29: every status the server answers with is in docs/server.md's table, and is a
problem document.

docs/server.md did not list 431 (a request header over hypercorn's limit), though the
server answered it; and a bug in a handler (an exception no handler expected) was
Starlette's plain-text ``Internal Server Error``, not the problem document the module's
docs promised.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import trio

from actormem import open_memory
from actormem.server import _app, _run
from actormem.server._app import create_app

from .serverproc import exchange, serve_port

REPO = Path(__file__).resolve().parent.parent


def _documented() -> set[int]:
    text = (REPO / "docs" / "server.md").read_text()
    errors = text[text.index("### Errors") : text.index("### Security")]
    return {int(s) for s in re.findall(r"^\| (\d{3}) \|", errors, re.MULTILINE)}


def _in_code() -> set[int]:
    source = Path(_app.__file__).read_text()
    made = re.findall(r"(?:_Refused|problem|super\(\)\.__init__)\(\s*(\d{3})\b", source)
    # 405: Starlette's own HTTPException, given its Allow header by ``http_error``.
    return {int(s) for s in made} | set(_run._UNREADABLE) | {405}


def test_the_table_lists_every_status_the_code_answers() -> None:
    assert {400, 401, 404, 405, 413, 422, 431, 500, 501, 503} <= _in_code()
    assert _documented() == _in_code()


async def test_a_header_too_large_gets_a_431_problem_document() -> None:
    stop = trio.Event()
    request = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
    async with open_memory() as memory, trio.open_nursery() as nursery:
        port = await serve_port(nursery, memory, stop)
        answer = await trio.to_thread.run_sync(exchange, port, request)
        stop.set()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431"), answer[:200]
    assert b"content-type: application/problem+json" in head.lower()
    assert b"connection: close" in head.lower()
    assert json.loads(body) == {
        "type": "about:blank",
        "title": "Request Header Fields Too Large",
        "status": 431,
        "detail": "the request's header is too large",
    }


async def test_a_bug_in_a_handler_is_a_500_problem_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with open_memory() as memory:
        app = create_app(memory)

        def broken() -> None:
            raise ZeroDivisionError("a bug")

        monkeypatch.setattr(memory, "statistics", broken)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.get("/v1/statistics")
            assert (await client.get("/healthz")).status_code == 200  # it still serves
    assert answer.status_code == 500
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json() == {
        "type": "about:blank",
        "title": "Internal Server Error",
        "status": 500,
        "detail": "an error in actormem, logged by the server: ZeroDivisionError",
    }


_SLOW = b"GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n"
_STORE_BODY = b'{"category": "fact", "memory": "sent behind the stop"}'
_STORE = (
    b"POST /v1/entries HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_STORE_BODY), _STORE_BODY)
)


async def test_the_stop_closes_a_kept_alive_connection_after_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The defect docs/server.md listed under "Stopping": an answer in progress when the
    stop began did not say ``Connection: close``, so a client kept the connection and
    lost its next request on it, and a connection holding that next request already
    stayed parked until the graceful deadline (here 60 s: the stop would time out)."""
    stop = trio.Event()
    answers: list[bytes] = []
    with trio.fail_after(30):  # the graceful deadline would be 60 s
        await _serve_pipelined(stop, answers, monkeypatch)
    head, _, body = answers[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), answers[0][:200]
    assert b"connection: close" in head.lower()
    assert json.loads(body) == {"status": "ready", "entries": 0}  # and nothing after it


async def _serve_pipelined(
    stop: trio.Event, answers: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_memory() as memory, trio.open_nursery() as nursery:
        entered = trio.Event()
        real = memory.store_many

        async def slow(entries: list[object]) -> None:  # /readyz's round trip
            entered.set()
            await stop.wait()
            await real(entries)  # type: ignore[arg-type]

        monkeypatch.setattr(memory, "store_many", slow)
        port = await serve_port(nursery, memory, stop, graceful_timeout=60.0)

        async def client() -> None:
            sent = _SLOW + _STORE  # the store waits behind the slow request, unread
            answer = await trio.to_thread.run_sync(exchange, port, sent, abandon_on_cancel=True)
            answers.append(answer)

        nursery.start_soon(client)
        await entered.wait()
        stop.set()
    assert len(memory) == 0  # the store behind the stop was not applied
