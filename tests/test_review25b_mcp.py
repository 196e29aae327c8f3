"""review25b: ``actormem mcp`` (branch mcp25) driven as a user would.

Defects found (each a test below):

1. A request nested just under Python's recursion limit crashed the server: Python's
   ``json.loads`` (in ``_answer_to_unreadable``) took the line pydantic refused, and
   ``_lone_surrogate``'s ``json.dumps``, a few frames deeper, raised ``RecursionError``
   out of the read loop: a traceback, exit 1, every later request unanswered.
2. A request whose id is not a string or an integer (``3.5``, ``true``, ``null``, an
   array, an object) gets no answer at all: the SDK reads it as a notification (extra
   fields allowed), so the client waits for its timeout instead of -32600. FIXED
   (mcp27: -32600, the id as sent when it is a number, else null).
3. A tool call that reaches the memory after a signal closed it (a race at SIGINT /
   SIGTERM) logs the SDK's "raised an unexpected exception" with a full traceback:
   ``trio.ClosedResourceError`` is not among the errors ``_reported`` turns into a
   one-line tool error. FIXED (``_reported`` takes it).
4. ``serve_stdio`` from the library, cancelled while stdin is open, leaves its abandoned
   reader thread on the same pipe (and its buffer): a second ``serve_stdio`` (or any
   later read of stdin) loses the client's next lines. fd 0 itself is restored. FIXED
   (mcp27: stdin read on the event loop, no read left behind).
5. ``actormem mcp --server URL`` logs httpx's "INFO HTTP Request: ..." on stderr for
   every tool call (the root logger at INFO).
6. ``serve_stdio`` cancelled under asyncio (the docstring: "Runs under trio or
   asyncio"): the abandoned read is in a non-daemon anyio worker thread, so the process
   cannot exit until the client writes a line or closes stdin. FIXED (mcp27: as 4).

Held (checked by hand, see the report): SIGINT/SIGTERM at many points with ``--path``
(every acknowledged store in the file after, exit 130/143 and the one line), with
``--server`` and in memory; 1,700-request bursts then EOF answered in full (all three
backends); stdin closed mid-line (-32700, exit 0); a 6 MB line (a tool error); invalid
UTF-8 (U+FFFD, as the SDK's own reader); a ``notifications/cancelled``; stdout closed
by the client (exit 141, silent, the file consistent).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install -e '.[test]')")

import actormem.integrations.mcp as mcp_mod  # noqa: E402
from actormem import open_memory  # noqa: E402
from actormem.integrations.mcp import build_mcp_server  # noqa: E402

from .test_mcp25 import _unreadable  # noqa: E402
from .test_tidy24a_mcp import INITIALIZED, _call, _init  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def _run_command(payload: bytes, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    """``python -m actormem mcp ARGS`` fed ``payload`` then EOF (killed after 120 s: a
    hang); its status, its answers, its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "actormem", "mcp", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        out, err = proc.communicate(payload, timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    answers = [json.loads(line) for line in out.decode().splitlines()]
    return proc.returncode, answers, err.decode(errors="replace")


START = _line(_init()) + _line(INITIALIZED)


# ------------------------------------------------------------- 1. deep nesting


def _nested(ident: int, depth: int) -> str:
    return (
        f'{{"jsonrpc": "2.0", "id": {ident}, "method": "ping", '
        f'"params": {{"a": {"[" * depth}{"]" * depth}}}}}\n'
    )


def test_no_nesting_depth_raises_out_of_the_answer() -> None:
    """Every depth pydantic refuses gets an answer (or None), never a RecursionError:
    somewhere under the recursion limit ``json.loads`` succeeds and the ``json.dumps``
    a few frames deeper fails (deterministic: every depth is tried)."""
    for depth in range(200, sys.getrecursionlimit() + 50):
        try:
            exc = _unreadable(_nested(5, depth))
        except AssertionError:  # the SDK reads it: nothing to answer
            continue
        try:
            mcp_mod._answer_to_unreadable(exc)
        except RecursionError:
            pytest.fail(f"depth {depth}: RecursionError out of _answer_to_unreadable")


def test_the_command_answers_every_nesting_depth() -> None:
    """Lines nested 850..1050 deep, then a ``stats``: the command answers each and exits
    0 (before: one depth near 975 crashed it with a traceback, exit 1)."""
    depths = range(850, 1050)
    body = b"".join(_nested(100 + i, d).encode() for i, d in enumerate(depths))
    status, answers, err = _run_command(START + body + _line(_call(1, "stats", {})))
    assert "RecursionError" not in err
    assert status == 0, err[-2000:]
    assert len(answers) == 1 + len(depths) + 1
    assert answers[-1]["id"] == 1


# ------------------------------------------------------------- 2. odd ids


@pytest.mark.parametrize(
    ("ident", "echoed"),
    [(3.5, 3.5), (3.0, 3.0), (-1e300, -1e300), (True, None), (None, None), ([1], None)]
    + [({"a": 1}, None)],
)
def test_a_request_with_an_id_of_another_type_is_answered(ident: Any, echoed: Any) -> None:
    """A ``ping`` whose id is not a string or an integer is an invalid request under MCP
    (string or integer ids only): it is owed -32600 (JSON-RPC 2.0 §5), not silence (the
    client would wait). FIXED (mcp27): the id as sent when it is a number (a JSON-RPC id:
    the client can match it), null otherwise (JSON-RPC: the id could not be told)."""
    ping = {"jsonrpc": "2.0", "id": ident, "method": "ping"}
    status, answers, err = _run_command(START + _line(ping) + _line(_call(1, "stats", {})))
    assert status == 0, err
    assert [a.get("id") for a in answers] == [0, echoed, 1]
    assert type(answers[1]["id"]) is type(echoed)  # 3.0 stays 3.0, not 3
    assert answers[1]["error"]["code"] == -32600


def test_ids_of_every_accepted_type_and_duplicates_are_answered() -> None:
    """Held: string, empty string, negative and huge integer ids, a duplicate id and
    ``7`` beside ``"7"``: each request answered once, with its id as sent."""
    ids: list[Any] = ["s", "", -1, 2**70, 7, 7, "7"]
    body = b"".join(_line({"jsonrpc": "2.0", "id": i, "method": "ping"}) for i in ids)
    status, answers, err = _run_command(START + body)
    assert status == 0, err
    assert sorted(map(json.dumps, (a["id"] for a in answers[1:]))) == sorted(map(json.dumps, ids))


# ------------------------------------------------------------- 3. a closed memory


def test_a_call_on_a_closed_memory_is_one_line(caplog: pytest.LogCaptureFixture) -> None:
    """The race at a signal, made deterministic: a tool call reaching a memory already
    closed. Due: a tool error naming the cause, logged without a traceback; before,
    the SDK's bare "Error executing tool remember" and "raised an unexpected exception"
    with the traceback (seen on stderr after ``kill -TERM`` during a burst of ``remember``)."""
    from mcp.server.mcpserver.exceptions import ToolError

    async def main() -> BaseException | None:
        async with open_memory() as memory:
            server = build_mcp_server(memory)
        try:
            await server.call_tool("remember", {"text": "after the close"})
        except ToolError as exc:
            return exc
        return None

    with caplog.at_level(logging.INFO, logger="mcp"):
        exc = trio.run(main)
    assert exc is not None
    assert str(exc).endswith("ClosedResourceError: the memory is closed")
    assert not any(r.exc_info for r in caplog.records if r.name.startswith("mcp"))


# ------------------------------------------------------------- 4. serve_stdio twice

TWICE = """
import os, sys, trio, trio.testing
sys.path.insert(0, {repo!r})
import actormem.integrations.mcp as mcp_mod
from actormem import open_memory
from actormem.integrations.mcp import build_mcp_server, serve_stdio

initialized = trio.Event()
read = mcp_mod._Unanswered.read
def noting(self, item):
    read(self, item)
    if getattr(getattr(item, "message", None), "method", None) == "notifications/initialized":
        initialized.set()
mcp_mod._Unanswered.read = noting

async def main():
    before = os.fstat(0)
    async with open_memory() as memory:
        server = build_mcp_server(memory)
        async with trio.open_nursery() as nursery:
            async def cancel_when_idle():  # the reader then waits in readline
                await initialized.wait()
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
            nursery.start_soon(cancel_when_idle)
            await serve_stdio(server)
        after = os.fstat(0)
        same = (before.st_ino, before.st_dev) == (after.st_ino, after.st_dev)
        sys.stderr.write(f"fd 0 restored: {{same}}\\n")
        sys.stderr.flush()
        await serve_stdio(server, grace=30)

trio.run(main)
"""


def _script(path: Path, template: str) -> subprocess.Popen[bytes]:
    """``template`` (formatted with this checkout's root) written to ``path`` and run,
    its three standard streams piped."""
    path.write_text(template.format(repo=str(REPO)))
    return subprocess.Popen(
        [sys.executable, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )


def test_serve_stdio_twice_from_the_library(tmp_path: Path) -> None:
    """A first ``serve_stdio`` cancelled with stdin open, then a second: fd 0 is
    restored (held), and the lines the client writes next reach the second serving
    (before: the first's abandoned reader took them all, no answer came)."""
    proc = _script(tmp_path / "twice.py", TWICE)
    assert proc.stdin is not None
    assert proc.stderr is not None
    assert proc.stdout is not None
    proc.stdin.write(START)  # the first serving: initialized, then cancelled
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0
    assert proc.stderr.readline() == b"fd 0 restored: True\n"
    proc.stdin.write(_line(_init(10)) + _line(INITIALIZED) + _line(_call(1, "stats", {})))
    proc.stdin.close()
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with proc.stdout, proc.stderr:
        out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a["id"] for a in answers] == [10, 1], err[-2000:]


# ------------------------------------------------------------- 5. --server's log


def test_the_server_backend_logs_no_line_per_call() -> None:
    """``actormem mcp --server URL``: 20 successful calls, then EOF. Due: nothing on
    stderr for calls that succeeded (a client shows the server's stderr as its log);
    before: httpx's "INFO HTTP Request: POST .../v1/entries "HTTP/1.1 201 "" per call,
    the root logger set to INFO by ``_log_lines`` (as by the SDK's setup before)."""
    from .serverproc import ServerProcess

    with ServerProcess() as srv:
        calls = b"".join(_line(_call(i, "remember", {"text": f"t{i}"})) for i in range(1, 21))
        status, answers, err = _run_command(START + calls, "--server", srv.url)
        assert srv.stop()[0] == 0
    assert status == 0, err
    assert len(answers) == 21
    assert not any(a["result"].get("isError") for a in answers[1:])
    assert "HTTP Request" not in err


# ------------------------------------------------------------- 6. under asyncio

UNDER_ASYNCIO = """
import asyncio, sys
sys.path.insert(0, {repo!r})
from actormem.integrations.mcp import build_mcp_server, serve_stdio

class Nothing:
    async def store(self, entry): pass
    async def delete(self, id): return False
    async def retrieve_scored(self, *args, **kwargs): return []
    def statistics(self): return None

async def main():
    task = asyncio.ensure_future(serve_stdio(build_mcp_server(Nothing())))
    await asyncio.sleep(0.5)  # (not a threshold: any point while it serves will do)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    sys.stderr.write("cancelled\\n")
    sys.stderr.flush()

asyncio.run(main())
"""


def test_serve_stdio_cancelled_under_asyncio_lets_the_process_exit(tmp_path: Path) -> None:
    """The docstring: "a cancellation ends it while stdin is still open ... Runs under
    trio or asyncio". Under asyncio the cancellation returns, but the abandoned read
    runs in an anyio worker thread that is not a daemon: the process cannot exit until
    the client writes a line or closes stdin (under trio it exits at once). Killed
    after 20 s with stdin still open: a hang."""
    proc = _script(tmp_path / "under_asyncio.py", UNDER_ASYNCIO)
    assert proc.stdin is not None
    assert proc.stderr is not None
    assert proc.stdout is not None
    try:
        assert proc.stderr.readline() == b"cancelled\n"
        try:
            status: int | str = proc.wait(timeout=20)  # stdin still open
        except subprocess.TimeoutExpired:
            status = "hung with stdin open"
    finally:
        proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert status == 0
