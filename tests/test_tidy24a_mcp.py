"""``actormem mcp`` at the end of its input: the requests already read are answered.

The SDK's loop cancels the calls still running when stdin ends; before ``serve_stdio``
a ``forget`` (or a burst of ``remember``s) sent just before the client closed stdin got
"Connection closed", or no answer at all. Now the end of the input reaches the SDK only
once every request read was answered (or withdrawn by the client), ``grace`` seconds at
most, and a cancellation (Ctrl-C) ends that wait at once.
"""

from __future__ import annotations

import json
import math
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install -e '.[test]')")

import anyio  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402
from mcp.types import jsonrpc_message_adapter  # noqa: E402

from actormem import MemoryStatistics  # noqa: E402
from actormem.integrations.mcp import build_mcp_server, serve_stdio, serve_streams  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _init(ident: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _call(ident: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def _tool_result(reply: dict[str, Any]) -> Any:
    assert "result" in reply, reply
    assert not reply["result"].get("isError"), reply
    return json.loads(reply["result"]["content"][0]["text"])


# ------------------------------------------------------------------ the real command


def test_a_burst_sent_before_stdin_closes_is_answered_and_kept(tmp_path: Path) -> None:
    """Fifty ``remember``s and a ``forget`` written at once, then stdin closed: each
    gets its own answer (before the fix, 14 of 22 answers came for a burst of 20, the
    last ones missing and the ``forget`` answered "Connection closed"), and the file
    holds every entry acknowledged."""
    db = tmp_path / "m.db"
    n = 50
    lines = [_init(), INITIALIZED]
    lines += [_call(i + 1, "remember", {"text": f"entry number {i}"}) for i in range(n)]
    lines.append(_call(n + 1, "forget", {"id": str(uuid.uuid4())}))
    run = subprocess.run(
        [sys.executable, "-m", "actormem", "mcp", "--path", str(db)],
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    replies = [json.loads(line) for line in run.stdout.splitlines()]
    by_id = {r["id"]: r for r in replies}
    assert len(by_id) == len(replies) == n + 2
    assert sorted(by_id) == list(range(n + 2))
    ids = {_tool_result(by_id[i + 1])["id"] for i in range(n)}
    assert _tool_result(by_id[n + 1]) == {"deleted": False}

    async def stored() -> set[str]:
        from actormem import open_memory

        async with open_memory(path=db) as memory:
            return {str(e.id) for e in memory.snapshot()}

    assert trio.run(stored) == ids


def _black_hole() -> socket.socket:
    """A listening socket that never answers (connections wait in its backlog)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


def test_ctrl_c_ends_the_wait_for_answers(tmp_path: Path) -> None:
    """``--server`` at a server that never answers: a ``forget`` in flight when stdin
    closes is waited for (the client's timeout is 10 s), and a SIGINT then ends the
    command at once with 130 (not 0 once the call timed out). Once marked xfail: trio's
    KeyboardInterrupt could be lost (tests/test_mcp25.py); the command now receives the
    signal with trio.open_signal_receiver and cancels the serving."""
    hole = _black_hole()
    url = f"http://127.0.0.1:{hole.getsockname()[1]}"
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "actormem", "mcp", "--server", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        ) as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None
            assert proc.stderr is not None
            try:
                proc.stdin.write(json.dumps(_init()) + "\n" + json.dumps(INITIALIZED) + "\n")
                proc.stdin.flush()
                assert json.loads(proc.stdout.readline())["id"] == 0  # serving
                forget = _call(1, "forget", {"id": str(uuid.uuid4())})
                proc.stdin.write(json.dumps(forget) + "\n")
                proc.stdin.close()
                time.sleep(1.0)  # (the order does not matter: an earlier SIGINT gives 130)
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
            err = proc.stderr.read()
            assert proc.returncode == 128 + signal.SIGINT, err
            assert "interrupted (SIGINT)" in err
    finally:
        hole.close()


# ------------------------------------------------------------------ in this process


class _Backend:
    """A memory whose ``delete`` waits for ``release`` (it notes when it started and
    whether it was cancelled)."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.release = trio.Event()
        self.cancelled = False

    async def store(self, entry: Any) -> None:
        pass

    async def delete(self, id: uuid.UUID) -> bool:
        self.started.set()
        try:
            await self.release.wait()
        except trio.Cancelled:
            self.cancelled = True
            raise
        return True

    async def retrieve_scored(self, query: str, limit: int = 5, **filters: Any) -> list[Any]:
        return []

    def statistics(self) -> MemoryStatistics:
        raise AssertionError("not called")


async def _session(
    backend: _Backend, grace: float, messages: list[dict[str, Any]], then: Any
) -> tuple[list[dict[str, Any]], bool]:
    """Serve ``backend`` over memory streams: send ``messages``, close the input, wait
    until every task is blocked (the server waits for the call in flight), run
    ``then(scope)``; return the replies and whether the serving was cancelled."""
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](16)
    replies: list[dict[str, Any]] = []

    async def collect() -> None:
        async with from_server:
            async for item in from_server:
                replies.append(item.message.model_dump(by_alias=True, exclude_unset=True))

    server = build_mcp_server(backend)
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect)

            async def feed() -> None:
                async with to_server:
                    for m in messages:
                        await to_server.send(
                            SessionMessage(jsonrpc_message_adapter.validate_python(m))
                        )
                await trio.testing.wait_all_tasks_blocked()
                await then(scope)

            nursery.start_soon(feed)
            await serve_streams(server, server_reads, server_writes, grace=grace)
    return replies, scope.cancelled_caught


def _by_id(replies: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {r["id"]: r for r in replies if "id" in r}


def test_a_call_in_flight_at_the_end_is_finished_and_answered() -> None:
    backend = _Backend()

    async def main() -> tuple[list[dict[str, Any]], bool]:
        async def then(scope: trio.CancelScope) -> None:
            backend.release.set()  # only now, the input long ended

        return await _session(
            backend,
            math.inf,
            [_init(), INITIALIZED, _call(1, "forget", {"id": str(uuid.uuid4())})],
            then,
        )

    replies, cancelled = trio.run(main)
    assert not cancelled
    assert not backend.cancelled
    assert _tool_result(_by_id(replies)[1]) == {"deleted": True}


def test_the_wait_is_bounded_by_grace() -> None:
    """A call still running ``grace`` seconds after the end is cancelled and answered
    with the SDK's "Connection closed" error (the clock jumps: no real wait)."""
    backend = _Backend()

    async def main() -> tuple[list[dict[str, Any]], bool]:
        async def then(scope: trio.CancelScope) -> None:
            pass  # never released

        return await _session(
            backend,
            5.0,
            [_init(), INITIALIZED, _call(1, "forget", {"id": str(uuid.uuid4())})],
            then,
        )

    clock = trio.testing.MockClock(autojump_threshold=0)
    replies, cancelled = trio.run(main, clock=clock)
    assert not cancelled
    assert backend.cancelled
    assert clock.current_time() >= 5.0
    assert _by_id(replies)[1]["error"]["message"] == "Connection closed"


def test_a_cancellation_ends_the_wait_at_once() -> None:
    """``grace`` unbounded and the call never released: cancelling (what a Ctrl-C does
    under trio) ends the serving."""
    backend = _Backend()

    async def main() -> tuple[list[dict[str, Any]], bool]:
        async def then(scope: trio.CancelScope) -> None:
            scope.cancel()

        return await _session(
            backend,
            math.inf,
            [_init(), INITIALIZED, _call(1, "forget", {"id": str(uuid.uuid4())})],
            then,
        )

    replies, cancelled = trio.run(main)
    assert cancelled
    assert backend.cancelled


def test_a_request_the_client_cancelled_is_not_waited_for() -> None:
    """``notifications/cancelled`` withdraws a request (the SDK never answers it): with
    ``grace`` unbounded the serving still ends."""
    backend = _Backend()
    cancel = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "changed my mind"},
    }

    async def main() -> tuple[list[dict[str, Any]], bool]:
        async def then(scope: trio.CancelScope) -> None:
            pass

        msgs = [_init(), INITIALIZED, _call(1, "forget", {"id": str(uuid.uuid4())}), cancel]
        return await _session(backend, math.inf, msgs, then)

    replies, cancelled = trio.run(main)
    assert not cancelled
    assert backend.cancelled
    assert 1 not in _by_id(replies)


@pytest.mark.parametrize("grace", [-1.0, math.nan, True, "1", None])
def test_grace_is_checked(grace: Any) -> None:
    async def main() -> None:
        server = build_mcp_server(_Backend())
        with pytest.raises(ValueError, match="grace"):
            await serve_stdio(server, grace=grace)
        send, receive = anyio.create_memory_object_stream[Any](1)
        with send, receive, pytest.raises(ValueError, match="grace"):
            await serve_streams(server, receive, send, grace=grace)

    trio.run(main)
