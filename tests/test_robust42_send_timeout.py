"""robust42: a client that stops reading a streamed ``GET /v1/export`` outside a stop no
longer holds its snapshot for good.

hypercorn (0.18) writes with no deadline (shielded from cancellation), so such a client
held the export's snapshot, and with it every record version evicted or replaced since,
for as long as it kept its connection open (docs/server.md's known limit until then).
Now a write whose client takes none of it for ``send_timeout`` seconds resets the
connection: the export ends, the snapshot is released, the client reads ``ECONNRESET``
after what reached it. A client that reads slowly but steadily gets every line.

Real hypercorn servers on 127.0.0.1 in this trio run, the deadline made small. The
30 s bounds only keep a failure from hanging the suite; nothing here times anything.
"""

from __future__ import annotations

import gc
import json
import logging
import socket
import threading
import time
from pathlib import Path

import pytest
import trio
from hypercorn.trio.tcp_server import TCPServer

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem.cli._main import main
from actormem.server._run import _protocol_send, serve_http, serve_memory_http

from .test_export31_server_close import _parse
from .test_stop32_server import (
    _TEXT,
    _head,
    _keep_configs,
    _read_all,
    _Watched,
    count_exported,
    export_request,
)

_GUARD = 30.0  # seconds: a hang guard, not a timing assertion


async def _serve(nursery: trio.Nursery, memory: object, stop: trio.Event, deadline: float) -> int:
    binds = await nursery.start(
        lambda task_status: serve_memory_http(
            memory,  # type: ignore[arg-type]
            port=0,
            stop=stop,
            graceful_timeout=1.0,
            send_timeout=deadline,
            task_status=task_status,
        )
    )
    return int(binds[0].rsplit(":", 1)[1])


async def _fill(memory: object, count: int) -> None:
    for start in range(0, count, 1000):
        await memory.store_many(  # type: ignore[attr-defined]
            [
                MemoryEntry(category=MemoryCategory.FACT, memory=f"e {i} " + "y" * _TEXT)
                for i in range(start, min(count, start + 1000))
            ]
        )


async def test_an_export_whose_client_stopped_reading_is_reset(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    count = 8_000  # about 32 MB of export: far more than the socket buffers hold
    exported = count_exported(monkeypatch)
    configs = _keep_configs(monkeypatch)
    read_on = threading.Event()
    outcome: list[object] = []

    def stall(port: int) -> None:
        with export_request(port) as conn:
            outcome.append(_head(conn))
            read_on.wait(_GUARD)  # reads nothing meanwhile, the connection kept open
            try:
                _read_all(conn)
            except ConnectionResetError as exc:
                outcome.append(exc)

    stop = trio.Event()
    with trio.fail_after(2 * _GUARD), caplog.at_level(logging.WARNING, "actormem.server"):
        async with open_memory() as memory, trio.open_nursery() as nursery:
            await _fill(memory, count)
            port = await _serve(nursery, memory, stop, 0.3)
            (config,) = configs
            assert isinstance(config.connections, _Watched)
            assert config.send_timeout == 0.3
            nursery.start_soon(trio.to_thread.run_sync, stall, port)
            await config.connections.emptied.wait()  # it ends with no stop
            gc.collect()
            assert memory.statistics().live_snapshots == 0  # the export's is released
            read_on.set()
            stop.set()
    head, reset = outcome
    assert isinstance(head, bytes)
    assert head.startswith(b"HTTP/1.1 200 ")
    assert isinstance(reset, ConnectionResetError)  # not an end: the answer was cut
    assert 0 < exported[0] < count
    assert "(send timeout): its connection was reset" in caplog.text


async def test_a_slow_reader_gets_the_whole_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline is for progress: a client that pauses between reads, each pause far
    shorter than it, gets every line."""
    count = 1_000  # about 4 MB
    configs = _keep_configs(monkeypatch)

    def slow(port: int) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=_GUARD) as conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            conn.sendall(b"GET /v1/export HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
                time.sleep(0.02)
        return answer

    stop = trio.Event()
    with trio.fail_after(4 * _GUARD):
        async with open_memory() as memory, trio.open_nursery() as nursery:
            await _fill(memory, count)
            port = await _serve(nursery, memory, stop, 5.0)
            answer = await trio.to_thread.run_sync(slow, port)
            (config,) = configs
            await config.connections.emptied.wait()
            stop.set()
    response, body, ended = _parse(answer)
    assert response.status_code == 200
    assert ended
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert sorted(int(line["memory"].split()[1]) for line in lines) == list(range(count))


async def test_the_send_hook_takes_effect() -> None:
    stop = trio.Event()
    with trio.fail_after(_GUARD):
        async with open_memory() as memory, trio.open_nursery() as nursery:
            await _serve(nursery, memory, stop, 1.0)
            assert TCPServer.protocol_send is _protocol_send
            stop.set()


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
async def test_a_bad_send_timeout_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="send_timeout must be > 0 seconds or None"):
        await serve_http(send_timeout=bad, port=0, handle_signals=False)
    stop = trio.Event()
    async with open_memory() as memory:
        with pytest.raises(ValueError, match="send_timeout"):
            await serve_memory_http(memory, port=0, stop=stop, send_timeout=bad)


@pytest.mark.parametrize(
    ("bad", "error"),
    [("5", TypeError), (True, TypeError), ([1], TypeError), (10**400, ValueError)],
    ids=["str", "bool", "list", "int beyond a float"],
)
async def test_a_send_timeout_of_another_type_is_refused(bad: object, error: type) -> None:
    """Not a number (a str, a bool) or beyond any float: refused before the open with
    the argument's name, as a bad number is."""
    with trio.fail_after(_GUARD), pytest.raises(error, match="send_timeout must be"):
        await serve_http(send_timeout=bad, port=0, handle_signals=False)  # type: ignore[arg-type]
    stop = trio.Event()
    async with open_memory() as memory:
        with trio.fail_after(_GUARD), pytest.raises(error, match="send_timeout must be"):
            await serve_memory_http(memory, port=0, stop=stop, send_timeout=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["0", "-1", "inf", "soon"])
def test_serve_refuses_a_bad_send_timeout(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--send-timeout", bad]) == 2
    assert "--send-timeout" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["none", "None", " NONE "])
def test_serve_takes_none_for_no_send_timeout(text: str) -> None:
    from actormem.cli._main import build_parser

    args = build_parser().parse_args(["serve", "--send-timeout", text])
    assert args.send_timeout is None
    assert build_parser().parse_args(["serve", "--send-timeout", "2.5"]).send_timeout == 2.5
    assert build_parser().parse_args(["serve"]).send_timeout == 60


def test_the_write_benchmark_runs(tmp_path: Path) -> None:
    from stress import bench_server_writes

    out = tmp_path / "writes.json"
    result = bench_server_writes.main(["--writes", "20", "--rounds", "1", "--json", str(out)])
    assert json.loads(out.read_text())["ratio"] == result["ratio"] > 0
    assert len(result["rounds_s"]["actormem"]) == len(result["rounds_s"]["hypercorn"]) == 1
