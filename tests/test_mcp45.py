"""mcp45: a cancelled ``serve_stdio`` writes the answers it already made.

``test_review25b_mcp.py::test_serve_stdio_twice_from_the_library`` hung on CPython 3.12
and 3.13 (review rev44c): it cancels the first serving once every task is blocked, and
there that came while the SDK's writer task held the answer to ``initialize`` in its
text wrapper, its ``flush`` (a worker thread) cancelled before it ran; on 3.11 the
wrapper was freed at once and flushed on the way, on 3.12 and 3.13 it lived on in a
reference cycle that the collector broke buffer first, so the text was never written.
The SDK's writer could also lose an answer outright (a cancellation between the
server's send and the writer's write: the zero-buffer handover is a checkpoint), and a
cancellation while its ``flush`` waited on a stdout nobody reads waited for ever.

``serve_stdio`` now writes its answers itself (``_StdoutAnswers``; knob
``_WRITE_STDOUT``): an answer sent before a cancellation is written in full, within
``flush_grace`` seconds when nobody reads stdout, and the cancellation then goes on;
nothing is read from stdin after it. The serving runs in a task of its own, so that an
asyncio ``task.cancel()`` reaching the SDK's tasks one by one no longer comes out as
``BrokenResourceError`` (the asyncio case below failed so with the SDK's writer too);
``actormem mcp`` still exits 141 when the client closed stdout, ends after a signal
while nobody reads stdout (it never did), and a second ``serve_stdio`` at once is still
refused. Each script below runs in its own process (the serving claims descriptors 0
and 1) and is killed after 120 s: a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import trio

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install -e '.[test]')")

from actormem.integrations.mcp import build_mcp_server, serve_stdio  # noqa: E402

from .test_mcp25 import _script as _command  # noqa: E402
from .test_review25b_mcp import _script  # noqa: E402
from .test_tidy24a_mcp import INITIALIZED, _call, _init  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


START = _line(_init()) + _line(INITIALIZED)

#: The start of every script: the hooks that cancel the serving when the server sends
#: its answer to request ``CANCEL_AT`` (the answer is then made: a tool's result, the
#: memory's store done; ``"second big"``: the second answer whose id is longer than a
#: page) and that count the reads of stdin after it.
PRELUDE = """
import asyncio, json, os, sys, trio
sys.path.insert(0, {repo!r})
import actormem.integrations.mcp as mcp_mod
from actormem.integrations.mcp import build_mcp_server, serve_stdio

CANCEL_AT = {cancel_at!r}
cancel = None
cancelled = False
reads_after = 0

big_sends = 0
send = mcp_mod._Answers.send
async def cancelling(self, item):
    global cancelled, big_sends
    ident = getattr(item.message, "id", None)
    if isinstance(ident, str) and len(ident) > 4096:
        big_sends += 1
        ident = "second big" if big_sends == 2 else None
    if ident == CANCEL_AT and not cancelled:
        cancelled = True
        cancel()  # the answer is made and sent: the serving is cancelled now
    await send(self, item)
mcp_mod._Answers.send = cancelling

fill = mcp_mod._PolledLines._fill
async def noted_fill(self):  # counts the reads of stdin (bytes or its end) after it
    global reads_after
    before = (len(self._buffer), self._eof)
    await fill(self)
    if cancelled and (len(self._buffer), self._eof) != before:
        reads_after += 1
mcp_mod._PolledLines._fill = noted_fill

def report(**facts):
    sys.stderr.write(json.dumps(dict(reads_after=reads_after, **facts)) + "\\n")
    sys.stderr.flush()
    while os.read(0, 65536):  # (the serving is over) until the test closes stdin
        pass
"""

UNDER_TRIO = """
from actormem import open_memory

async def main():
    global cancel
    async with open_memory() as memory:
        with trio.CancelScope() as scope:
            cancel = scope.cancel
            await serve_stdio(build_mcp_server(memory), flush_grace={flush_grace!r})
        stored = len(await memory.retrieve_scored("remembered", 10))
    report(cancelled=scope.cancelled_caught, stored=stored)

trio.run(main)
"""

UNDER_ASYNCIO = """
class Kept:
    def __init__(self): self.texts = []
    async def store(self, entry): self.texts.append(entry.memory)
    async def delete(self, id): return False
    async def retrieve_scored(self, *args, **kwargs): return []
    def statistics(self): return None

async def main():
    global cancel
    kept = Kept()
    serving = asyncio.ensure_future(
        serve_stdio(build_mcp_server(kept), flush_grace={flush_grace!r})
    )
    cancel = serving.cancel
    try:
        await serving
        was_cancelled = False
    except asyncio.CancelledError:
        was_cancelled = True
    report(cancelled=was_cancelled, stored=len(kept.texts))

asyncio.run(main())
"""


def _start(tmp_path: Path, body: str, *, cancel_at: int | str, flush_grace: float = 30.0) -> Any:
    """``PRELUDE`` and ``body`` run (``_script``: this checkout, the streams piped)."""
    template = (PRELUDE + body).format(repo="{repo}", cancel_at=cancel_at, flush_grace=flush_grace)
    return _script(tmp_path / "serve.py", template)


def _within(seconds: float, work: Any, proc: Any) -> bool:
    """``work()`` run in a thread; False (and ``proc`` killed) if it did not end within
    ``seconds``: a hang."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout=seconds)
    if thread.is_alive():
        proc.kill()
        thread.join()
        return False
    return True


def _finish(proc: Any, until: Any = None) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """The script's report (its first line on stderr, read while stdin is still open:
    the serving ended by the cancellation, not by the end of the input); then, with
    ``until`` (a test of the answers), stdout's lines until it holds, stdin still open;
    then, stdin closed, its exit, its answers (whole lines) and its stderr. A step that
    does not end within 120 s is a hang: the process is killed."""
    got: list[bytes] = []
    lines: list[bytes] = []

    def answers_until() -> None:
        while not until([json.loads(line) for line in lines]):
            line = proc.stdout.readline()
            if not line.endswith(b"\n"):
                break
            lines.append(line)

    try:
        hung = not _within(120, lambda: got.append(proc.stderr.readline()), proc)
        if not hung and until is not None:
            hung = not _within(120, answers_until, proc)
        proc.stdin.close()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with proc.stdout, proc.stderr:
        out, err = b"".join(lines) + proc.stdout.read(), proc.stderr.read().decode(errors="replace")
    assert got, f"no report: hung (killed after 120 s): {err[-2000:]}"
    assert got[0], f"no report: died: {err[-2000:]}"
    assert not hung, f"hung (killed after 120 s) waiting for the answers; stdout: {out[:300]!r}"
    assert proc.returncode == 0, got[0].decode(errors="replace") + err[-2000:]
    whole = out.split(b"\n")[:-1]  # (a last line cut short is not an answer)
    return json.loads(got[0]), [json.loads(line) for line in whole], err


@pytest.mark.parametrize("body", [UNDER_TRIO, UNDER_ASYNCIO], ids=["trio", "asyncio"])
def test_an_answer_made_before_the_cancel_reaches_stdout(tmp_path: Path, body: str) -> None:
    """The serving is cancelled as the server sends the answer to a ``remember`` (its
    store done). Due: that answer on stdout, the cancellation honoured (the scope caught
    it, the task cancelled), no read of stdin after it (the line sent after the
    ``remember`` may have been read before, never after). Before: the answer was lost
    under both (the cancellation came at the SDK's handover to its writer task)."""
    proc = _start(tmp_path, body, cancel_at=1)
    remember = _call(1, "remember", {"text": "remembered before the cancel"})
    proc.stdin.write(START + _line(remember) + _line(_call(2, "stats", {})))
    proc.stdin.flush()
    report, answers, err = _finish(proc)
    assert report == {"reads_after": 0, "cancelled": True, "stored": 1}, err[-2000:]
    ids = [a["id"] for a in answers]
    # (the ``stats`` may have been answered before the cancel, never cut: whole or none)
    assert ids in ([0, 1], [0, 1, 2], [0, 2, 1]), err[-2000:]
    remembered = answers[ids.index(1)]["result"]["content"][0]["text"]
    assert json.loads(remembered).keys() == {"id"}


def test_the_initialize_answer_reaches_stdout_when_cancelled_at_once(tmp_path: Path) -> None:
    """The first answer a serving makes, cancelled as it is sent: on stdout (before:
    under trio on CPython 3.12 and 3.13 it could stay in the SDK's writer's buffer for
    good, the hang of ``test_serve_stdio_twice_from_the_library``)."""
    proc = _start(tmp_path, UNDER_TRIO, cancel_at=0)
    proc.stdin.write(START)
    proc.stdin.flush()
    report, answers, err = _finish(proc)
    assert report == {"reads_after": 0, "cancelled": True, "stored": 0}, err[-2000:]
    assert [a["id"] for a in answers] == [0]
    assert answers[0]["result"]["serverInfo"]["name"] == "actormem"


#: Shrinks the pipe of stdout to one page (Linux: ``F_SETPIPE_SZ``), so that one large
#: answer fills it.
SMALL_PIPE = """
import fcntl
fcntl.fcntl(1, 1031, 4096)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="F_SETPIPE_SZ is Linux's")
@pytest.mark.parametrize("body", [UNDER_TRIO, UNDER_ASYNCIO], ids=["trio", "asyncio"])
def test_a_cancel_ends_while_nobody_reads_stdout(tmp_path: Path, body: str) -> None:
    """stdout's pipe (one page) full, the client not reading it: two ``ping``s whose
    ids are 40,000 characters (so are their answers), the serving cancelled as the
    second answer is sent. Due: the cancellation ends, after ``flush_grace`` seconds,
    with stdout still unread, and no read of stdin after it; then, once the client
    reads, the answer whose write was under way comes out whole (the thread's write goes
    on), and every line on stdout is a whole answer. Before: under asyncio the
    cancellation waited for ever on the SDK's writer (a worker thread blocked in
    ``write``); under trio the big answer was lost (killed after 120 s waiting for it)."""
    body = body.replace("async def main():", SMALL_PIPE + "\nasync def main():", 1)
    proc = _start(tmp_path, body, cancel_at="second big", flush_grace=0.2)
    big = {"a" * 40_000, "b" * 40_000}
    pings = [{"jsonrpc": "2.0", "id": ident, "method": "ping"} for ident in sorted(big)]
    proc.stdin.write(START + b"".join(map(_line, pings)))
    proc.stdin.flush()

    def first_big_answer(answers: list[dict[str, Any]]) -> bool:
        return any(a["id"] in big for a in answers)

    report, answers, err = _finish(proc, until=first_big_answer)
    assert report["cancelled"] is True, err[-2000:]
    assert report["reads_after"] == 0
    assert {a["id"] for a in answers} <= {0} | big


def test_flush_grace_is_checked() -> None:
    server = build_mcp_server(object())  # type: ignore[arg-type]
    for bad in (-1.0, float("nan"), "5", True, None):
        with pytest.raises(ValueError, match="flush_grace must be a number of seconds >= 0"):
            _run_async(serve_stdio(server, flush_grace=bad))  # type: ignore[arg-type]


def _run_async(coroutine: Any) -> None:
    async def main() -> None:
        await coroutine

    trio.run(main)


# ------------------------------------------------------------- the command


@pytest.mark.parametrize("ours", [True, False], ids=["own writer", "sdk writer"])
def test_the_command_answers_alike_with_either_writer(tmp_path: Path, ours: bool) -> None:
    """``actormem mcp`` fed a few calls then EOF: the same answers through
    ``_StdoutAnswers`` as through the SDK's writer (the path before), each one line."""
    command = _command(
        tmp_path, f"import actormem.integrations.mcp as m\nm._WRITE_STDOUT = {ours}", "mcp"
    )
    calls = [_call(i, "remember", {"text": f"fact {i}"}) for i in range(1, 6)]
    calls.append(_call(6, "recall", {"query": "fact", "limit": 3}))
    payload = START + b"".join(map(_line, calls))
    run = subprocess.run(command, input=payload, capture_output=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    answers = sorted((json.loads(line) for line in run.stdout.splitlines()), key=lambda a: a["id"])
    assert [a["id"] for a in answers] == list(range(7))
    hits = json.loads(answers[6]["result"]["content"][0]["text"])["hits"]
    assert len(hits) == 3


def test_a_closed_stdout_ends_the_command_with_141(tmp_path: Path) -> None:
    """The client closed its end of stdout: the first answer's write fails (EPIPE), and
    the command stops quietly with 141 (as with the SDK's writer) instead of serving on
    and dropping every answer."""
    command = _command(tmp_path, "", "mcp")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        run = subprocess.run(
            command,
            input=START + _line(_call(1, "stats", {})),
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=REPO,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert run.returncode == 141, run.stderr.decode(errors="replace")


STRAY = """
import sys
sys.path.insert(0, {repo!r})
import trio
from actormem import open_memory
from actormem.integrations.mcp import build_mcp_server, serve_stdio

async def main():
    async with open_memory() as memory:
        server = build_mcp_server(memory)

        @server.tool()
        async def shout() -> str:
            print("stray print", flush=True)
            return "shouted"

        await serve_stdio(server)
    print("after the serving", flush=True)

trio.run(main)
"""


def test_stray_output_misses_the_wire_and_stdout_comes_back(tmp_path: Path) -> None:
    """A tool that prints: its text goes to stderr while serving (descriptor 1 points
    there, as under the SDK's own claim), the wire gets only answers, and stdout is
    descriptor 1's again after the serving."""
    script = tmp_path / "stray.py"
    script.write_text(STRAY.format(repo=str(REPO)))
    payload = START + _line(_call(1, "shout", {}))
    run = subprocess.run(
        [sys.executable, str(script)], input=payload, capture_output=True, cwd=REPO, timeout=120
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    lines = run.stdout.decode().splitlines()
    assert [json.loads(line)["id"] for line in lines[:-1]] == [0, 1]
    assert lines[-1] == "after the serving"
    assert "stray print" in run.stderr.decode()


@pytest.mark.skipif(sys.platform != "linux", reason="F_SETPIPE_SZ is Linux's")
def test_a_signal_ends_the_command_while_nobody_reads_stdout(tmp_path: Path) -> None:
    """``actormem mcp`` whose stdout the client never reads: two answers of 40 KB fill
    its pipe (64 KiB), then SIGTERM: the command exits 143 (after ``FLUSH_GRACE``) with
    its line on stderr. Before: it never exited (the SDK's writer blocked in ``write``
    and was waited for; killed after 120 s)."""
    import fcntl
    import signal
    import termios
    import time

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 65536)  # F_SETPIPE_SZ: the usual size, whatever it is
    proc = subprocess.Popen(
        _command(tmp_path, "", "mcp"),
        stdin=subprocess.PIPE,
        stdout=write_end,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    os.close(write_end)
    try:
        pings = [{"jsonrpc": "2.0", "id": c * 40_000, "method": "ping"} for c in "ab"]
        assert proc.stdin is not None
        proc.stdin.write(START + b"".join(map(_line, pings)))
        proc.stdin.flush()
        waiting = bytearray(4)
        for _ in range(2400):  # until the pipe is full: 15 of its 16 pages at least
            fcntl.ioctl(read_end, termios.FIONREAD, waiting)
            if int.from_bytes(waiting, sys.byteorder) >= 15 * 4096:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        try:
            status: int | str = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            status = "hung after SIGTERM"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(read_end)
        assert proc.stdin is not None
        assert proc.stderr is not None
        proc.stdin.close()
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
    assert status == 143, err[-2000:]
    assert err.endswith("actormem mcp: interrupted (SIGTERM)\n")


CONCURRENT = """
import sys
sys.path.insert(0, {repo!r})
import trio
from actormem import open_memory
from actormem.integrations.mcp import build_mcp_server, serve_stdio

async def main():
    async with open_memory() as memory:
        server = build_mcp_server(memory)
        async def serve():
            try:
                await serve_stdio(server)
            except RuntimeError as exc:  # (whichever comes second)
                sys.stderr.write(f"refused: {{exc}}\\n")
                sys.stderr.flush()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            nursery.start_soon(serve)
"""


def test_a_second_serving_at_once_is_refused(tmp_path: Path) -> None:
    """Two ``serve_stdio`` at once in one process: the second raises RuntimeError (as
    the SDK's claim of stdout did) instead of sending its answers to stderr; the first
    serves on and ends at the end of the input."""
    # (not concurrent.py: that name would hide the standard library's package)
    proc = _script(tmp_path / "two_at_once.py", CONCURRENT + "\ntrio.run(main)\n")
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    with proc.stdout, proc.stderr:
        out, err = proc.communicate(START + _line(_call(1, "stats", {})), timeout=120)
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    assert err.count(b"refused: another ") == 1  # (the SDK's before: "... claimed fd 1")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [0, 1]
