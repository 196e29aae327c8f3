"""review19c: a response the server sends before it has read the request's whole body
(413 over the body limit, 401 without the token) ends the connection, and says so
(``Connection: close``): without it a client reuses the connection for its next
request, which the server's close then drops ("Server disconnected": the flaky
tests/test_server.py::test_body_limit under load)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from .serverproc import ServerProcess

TOKEN = "review19c-token"


@pytest.fixture(scope="module")
def small() -> Iterator[ServerProcess]:
    with ServerProcess("--max-body", "4096") as srv:
        yield srv
        assert srv.stop()[0] == 0


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess("--in-memory", token=TOKEN, tmp=tmp_path_factory.mktemp("t")) as srv:
        yield srv
        assert srv.stop()[0] == 0


def _exchange(url: str, request: bytes) -> bytes:
    """Send ``request`` on a new connection; return the head of the first response."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=8) as sock:
        try:
            sock.sendall(request)
        except OSError:  # the server may close before it took every byte
            pass
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    return data.partition(b"\r\n\r\n")[0]


def _headers(head: bytes) -> dict[bytes, bytes]:
    lines = head.split(b"\r\n")[1:]
    return {k.strip().lower(): v.strip().lower() for k, _, v in (x.partition(b":") for x in lines)}


def _post(body: bytes, *, chunked: bool = False, extra: bytes = b"") -> bytes:
    if chunked:
        framing = b"Transfer-Encoding: chunked\r\n"
        payload = b"".join(b"%x\r\n%s\r\n" % (len(body[i : i + 1000]), body[i : i + 1000])
                           for i in range(0, len(body), 1000)) + b"0\r\n\r\n"
    else:
        framing, payload = b"Content-Length: %d\r\n" % len(body), body
    return (b"POST /v1/entries HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + framing + extra + b"\r\n" + payload)


BIG = b'{"category": "fact", "memory": "' + b"x" * 5000 + b'"}'


@pytest.mark.parametrize("chunked", [False, True])
def test_413_says_the_connection_closes(small: ServerProcess, chunked: bool) -> None:
    head = _exchange(small.url, _post(BIG, chunked=chunked))
    assert head.startswith(b"HTTP/1.1 413")
    assert _headers(head).get(b"connection") == b"close"


def test_401_with_a_body_says_the_connection_closes(guarded: ServerProcess) -> None:
    head = _exchange(guarded.url, _post(BIG))
    assert head.startswith(b"HTTP/1.1 401")
    assert _headers(head).get(b"connection") == b"close"


def test_a_read_body_keeps_the_connection(small: ServerProcess) -> None:
    body = b'{"category": "fact", "memory": "kept alive"}'
    head = _exchange(small.url, _post(body))
    assert head.startswith(b"HTTP/1.1 20"), head
    assert b"connection" not in _headers(head)
