"""mcp25: the known defects of ``actormem mcp`` (docs/benchmarks.md, branch mcp25).

1. A Ctrl-C could be lost: trio raises ``KeyboardInterrupt`` at any bytecode of code that
   is not KI-protected, trio's own ``Runner.spawn_impl`` included (``nursery.start_soon``
   called by a task). Raised there, after the new task joined its nursery but before it
   was scheduled, it leaves a child that never runs: the nursery waits for it forever,
   holding the ``KeyboardInterrupt`` it would raise. The command now receives SIGINT and
   SIGTERM with ``trio.open_signal_receiver``: the first cancels the serving. Reading
   stdin is abandoned on cancellation (the SDK's reader waited for a line or the end of
   stdin: a Ctrl-C with stdin open hung until then).
2. A line the SDK cannot read (not JSON, a lone surrogate, not JSON-RPC) got no answer.
3. A broken memory logged a traceback per failed call and answered "Error executing tool".
4. SIGTERM during the command's imports ended it silently.

The subprocess tests run the command through a small script (:func:`_script`) that may
patch something first (a signal sent from inside a given call: no timing involved).
"""

from __future__ import annotations

import json
import logging
import math
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install -e '.[test]')")

import anyio  # noqa: E402
import pydantic  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402
from mcp.types import jsonrpc_message_adapter  # noqa: E402

import actormem.integrations.mcp as mcp_mod  # noqa: E402
from actormem import open_memory  # noqa: E402
from actormem.integrations.mcp import build_mcp_server, serve_streams  # noqa: E402

from .test_review24b_broken import _fill_after  # noqa: E402
from .test_tidy24a_mcp import INITIALIZED, _call, _init  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _line(message: dict[str, Any]) -> str:
    return json.dumps(message) + "\n"


def _script(tmp_path: Path, prelude: str, *args: str) -> list[str]:
    """The command line of a process that runs ``prelude`` and then ``actormem ARGS``
    from this checkout, as ``python -m actormem`` does."""
    script = tmp_path / "run_actormem.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\n{prelude}\n"
        f"sys.argv = ['actormem', *{list(args)!r}]\n"
        "from actormem.cli import run_command\nrun_command()\n"
    )
    return [sys.executable, str(script)]


def _serving(command: list[str]) -> subprocess.Popen[str]:
    """The command started and initialized (its answer to ``initialize`` read)."""
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(_line(_init()) + _line(INITIALIZED))
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0  # serving
    return proc


def _ended(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Wait for the process (60 s at most: killed then); its status, stdout, stderr."""
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stdout is not None
    assert proc.stderr is not None
    with proc.stdout, proc.stderr:
        return proc.returncode, proc.stdout.read(), proc.stderr.read()


# ------------------------------------------------------------------ 1. signals


#: Sends SIGINT to the process from inside trio's spawn of the first task started after
#: the ``forget`` request was read (``Runner.spawn_impl`` asks ``"task_spawned" in
#: self.instruments``, a Python-level ``UserDict.__contains__``): where trio's
#: KeyboardInterrupt left a child that never runs and the command hung.
SIGINT_IN_SPAWN = """
import os, signal
import trio._core._instrumentation as instrumentation
import actormem.integrations.mcp as mcp_mod
state = {"armed": False, "sent": False}
read = mcp_mod._Unanswered.read
def noting(self, item):
    read(self, item)
    if getattr(getattr(item, "message", None), "method", None) == "tools/call":
        state["armed"] = True
mcp_mod._Unanswered.read = noting
contains = instrumentation.Instruments.__contains__
def sending(self, key):
    if key == "task_spawned" and state["armed"] and not state["sent"]:
        state["sent"] = True
        sys.stderr.write("test: SIGINT sent inside spawn_impl\\n")
        os.kill(os.getpid(), signal.SIGINT)
    return contains(self, key)
instrumentation.Instruments.__contains__ = sending
"""


def test_sigint_inside_trios_spawn_ends_the_command(tmp_path: Path) -> None:
    """The SIGINT lands while trio registers the ``forget``'s handler task (before the
    fix: the task never ran, the ``forget`` was never answered, and the command hung
    after stdin closed). Now: exit 130, one line."""
    proc = _serving(_script(tmp_path, SIGINT_IN_SPAWN, "mcp", "--in-memory"))
    assert proc.stdin is not None
    proc.stdin.write(_line(_call(1, "forget", {"id": str(uuid.uuid4())})))
    proc.stdin.close()
    status, _, err = _ended(proc)
    assert "test: SIGINT sent inside spawn_impl" in err
    assert status == 128 + signal.SIGINT, err
    assert err.splitlines()[-1] == "actormem mcp: interrupted (SIGINT)"
    assert "Traceback" not in err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_with_stdin_still_open_ends_the_command(signum: int) -> None:
    """The client keeps stdin open (a terminal, or a client stopping the server by
    signal): the read of stdin is abandoned (before: SIGINT waited until a line came or
    stdin closed; SIGTERM killed the process without a word)."""
    proc = _serving([sys.executable, "-m", "actormem", "mcp", "--in-memory"])
    try:
        proc.send_signal(signum)
        status, _, err = _ended(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
    name = signal.Signals(signum).name
    assert status == 128 + signum, err
    assert err.splitlines() == [f"actormem mcp: interrupted ({name})"]


def test_a_call_in_flight_is_cancelled_by_the_signal(tmp_path: Path) -> None:
    """A SIGTERM while a call waits (a server that never answers: the client's timeout
    is 10 s) ends the command at once, the call not answered."""
    import socket

    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(16)
    url = f"http://127.0.0.1:{hole.getsockname()[1]}"
    prelude = SIGINT_IN_SPAWN.replace("signal.SIGINT)", "signal.SIGTERM)")
    try:
        proc = _serving(_script(tmp_path, prelude, "mcp", "--server", url))
        assert proc.stdin is not None
        proc.stdin.write(_line(_call(1, "forget", {"id": str(uuid.uuid4())})))
        proc.stdin.close()
        status, out, err = _ended(proc)
    finally:
        hole.close()
    assert status == 128 + signal.SIGTERM, err
    assert err.splitlines()[-1] == "actormem mcp: interrupted (SIGTERM)"
    for reply in map(json.loads, out.splitlines()):  # answered "Connection closed" or not
        assert reply["error"]["message"] == "Connection closed"


#: Sends ``SIGNUM`` to the process while ``MODULE`` is being imported (a finder asked
#: first for it).
SIGNAL_IN_IMPORT = """
import os, signal
class Finder:
    sent = False
    def find_spec(self, name, path=None, target=None):
        if name == MODULE and not Finder.sent:
            Finder.sent = True
            os.kill(os.getpid(), SIGNUM)
        return None
sys.meta_path.insert(0, Finder())
"""


@pytest.mark.parametrize("module", ["actormem.cli._main", "mcp", "mcp.server.stdio"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_imports_is_one_line(tmp_path: Path, module: str, signum: int) -> None:
    """The command line's modules (before the command runs), the SDK (imported by the
    command), the SDK's stdio transport (imported once trio runs): 128 + the signal,
    one line (SIGTERM ended the process silently before)."""
    prelude = f"MODULE = {module!r}\nSIGNUM = {int(signum)}\n{SIGNAL_IN_IMPORT}"
    run = subprocess.run(
        _script(tmp_path, prelude, "mcp", "--in-memory"),
        input="",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    name = signal.Signals(signum).name
    assert run.returncode == 128 + signum, run.stderr
    assert run.stderr.splitlines() == [f"actormem mcp: interrupted ({name})"]


# ------------------------------------------------------------------ 2. unreadable lines


def _unreadable(line: str) -> Exception:
    """What the SDK's stdio transport passes on for ``line`` (its parse error)."""
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError(f"the SDK reads {line!r}")


LONE = '"text": "\\ud800"'  # JSON text for a string holding a lone surrogate

#: Lines the SDK cannot read, and the answer each is due: (code, id), or None.
UNREADABLE = [
    ("this is not json\n", (-32700, None)),
    ('{"jsonrpc": "2.0", "id": 3, "method": "ping"\n', (-32700, None)),  # cut short
    ('{"jsonrpc": "2.0", "id": 3, "method": "ping"}{}\n', (-32700, None)),
    ('{"jsonrpc": "2.0", "id": 5, "method": "y", "params": {' + LONE + "}}\n", (-32700, 5)),
    ('{"jsonrpc": "2.0", "id": "a", "method": "x", "params": {' + LONE + "}}\n", (-32700, "a")),
    ('{"jsonrpc": "2.0", "id": null, "method": "x", "params": {' + LONE + "}}\n", (-32700, None)),
    ('{"jsonrpc": "2.0", "method": "notifications/x", "params": {' + LONE + "}}\n", None),
    ('{"jsonrpc": "2.0", "id": 9, "result": {' + LONE + "}}\n", None),  # a response
    ('["\\ud800"]\n', (-32700, None)),
    ('{"foo": 1}\n', (-32600, None)),
    ("[1, 2]\n", (-32600, None)),
    ('{"jsonrpc": "1.0", "id": 4, "method": "ping"}\n', (-32600, None)),
    ("42\n", (-32600, None)),
    ("\n", None),
    ("   \n", None),
    ("[" * 100_000 + "\n", (-32700, None)),  # deeper than either parser goes
]


@pytest.mark.parametrize(("line", "due"), UNREADABLE)
def test_the_answer_to_an_unreadable_line(line: str, due: tuple[int, Any] | None) -> None:
    answer = mcp_mod._answer_to_unreadable(_unreadable(line))
    if due is None:
        assert answer is None
        return
    assert answer is not None
    assert (answer.error.code, answer.id) == due
    assert answer.error.message == ("Parse error" if due[0] == -32700 else "Invalid Request")
    assert isinstance(answer.error.data, str)
    if "\\ud800" in line and isinstance(answer.error.data, str):
        assert "lone surrogate" in answer.error.data


def test_other_exceptions_get_no_answer() -> None:
    assert mcp_mod._answer_to_unreadable(ValueError("x")) is None


async def _session(server: Any, items: list[SessionMessage | Exception]) -> list[dict[str, Any]]:
    """Serve ``server`` over memory streams fed ``items`` (then the end); the replies."""
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](64)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](64)
    replies: list[dict[str, Any]] = []

    async def collect() -> None:
        async with from_server:
            async for item in from_server:
                replies.append(item.message.model_dump(by_alias=True, exclude_unset=True))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect)
        async with to_server:
            for item in items:
                await to_server.send(item)
        await serve_streams(server, server_reads, server_writes, grace=math.inf)
    return replies


def _message(message: dict[str, Any]) -> SessionMessage:
    return SessionMessage(jsonrpc_message_adapter.validate_python(message))


class _Nothing:
    """A memory with nothing in it (what ``recall`` and ``forget`` see)."""

    async def store(self, entry: Any) -> None:
        pass

    async def delete(self, id: uuid.UUID) -> bool:
        return False

    async def retrieve_scored(self, query: str, limit: int = 5, **filters: Any) -> list[Any]:
        return []

    def statistics(self) -> Any:
        raise AssertionError("not called")


@pytest.mark.parametrize("answer", [True, False])
def test_unreadable_lines_answered_between_the_others(
    answer: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each unreadable line gets its answer (knob off: none, as before), and the
    requests around them are answered alike either way."""
    monkeypatch.setattr(mcp_mod, "_ANSWER_UNREADABLE", answer)
    bad = [(line, due) for line, due in UNREADABLE if "[[[" not in line]
    items: list[SessionMessage | Exception] = [_message(_init()), _message(INITIALIZED)]
    for i, (line, _) in enumerate(bad):
        items.append(_unreadable(line))
        items.append(_message(_call(100 + i, "forget", {"id": str(uuid.uuid4())})))
    replies = trio.run(_session, build_mcp_server(_Nothing()), items)  # type: ignore[arg-type]
    good = {r["id"]: r for r in replies if isinstance(r.get("id"), int) and r["id"] >= 100}
    assert sorted(good) == [100 + i for i in range(len(bad))]
    assert all(
        json.loads(r["result"]["content"][0]["text"]) == {"deleted": False} for r in good.values()
    )
    errors = [(r["error"]["code"], r["id"]) for r in replies if "error" in r]
    due = [d for _, d in bad if d is not None] if answer else []
    assert sorted(errors, key=repr) == sorted(due, key=repr)


def test_the_command_answers_unreadable_lines() -> None:
    """The real command over stdin: a line that is not JSON, a request with a lone
    surrogate and JSON that is not JSON-RPC are answered, a notification with a lone
    surrogate and a blank line are not; the server goes on."""
    lines = [
        _line(_init()),
        _line(INITIALIZED),
        "this is not json\n",
        '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "remember", '
        '"arguments": {' + LONE + "}}}\n",
        '{"jsonrpc": "2.0", "method": "notifications/x", "params": {' + LONE + "}}\n",
        '{"foo": 1}\n',
        "\n",
        _line(_call(6, "recall", {"query": "x"})),
    ]
    run = subprocess.run(
        [sys.executable, "-m", "actormem", "mcp", "--in-memory"],
        input="".join(lines),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    replies = [json.loads(line) for line in run.stdout.splitlines()]
    errors = sorted(((r["error"]["code"], r["id"]) for r in replies if "error" in r), key=repr)
    assert errors == sorted([(-32700, 5), (-32700, None), (-32600, None)], key=repr)
    assert [r["id"] for r in replies if "result" in r] == [0, 6]


# ------------------------------------------------------------------ 3. a broken memory


async def _broken_session(path: Path) -> list[dict[str, Any]]:
    async with open_memory(path=path) as memory:
        items: list[SessionMessage | Exception] = [_message(_init()), _message(INITIALIZED)]
        items += [_message(_call(i, "remember", {"text": f"entry {i}"})) for i in (1, 2, 3)]
        items.append(_message(_call(4, "recall", {"query": "entry"})))
        items.append(_message(_call(5, "forget", {"id": str(uuid.uuid4())})))
        server = build_mcp_server(memory)  # type: ignore[arg-type]
        # one at a time: each call after the first finds the memory broken
        to_server, reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        writes, from_server = anyio.create_memory_object_stream[SessionMessage](64)
        replies: list[dict[str, Any]] = []
        async with trio.open_nursery() as nursery:

            async def feed() -> None:
                async with to_server:
                    for item in items:
                        await to_server.send(item)
                        await trio.testing.wait_all_tasks_blocked()

            nursery.start_soon(feed)
            await serve_streams(server, reads, writes, grace=math.inf)
        async with from_server:
            async for item in from_server:
                replies.append(item.message.model_dump(by_alias=True, exclude_unset=True))
        return replies


@pytest.mark.parametrize("knob", [True, False])
def test_a_broken_memory_answers_its_cause_without_a_traceback(
    knob: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first ``remember``'s commit fails (the memory breaks); it and every later call
    answer "the memory is broken ...: StorageError: ... database or disk is full", and
    the SDK logs one record per call, with no traceback. Knob off: as before, the later
    calls answer "Error executing tool" and log their traceback."""
    import trio.testing  # noqa: F401  (wait_all_tasks_blocked)

    monkeypatch.setattr(mcp_mod, "_BROKEN_AS_TOOL_ERROR", knob)
    _fill_after(monkeypatch, 0)
    with caplog.at_level(logging.INFO, logger="mcp"):
        replies = trio.run(_broken_session, tmp_path / "m.db")
    by_id = {r["id"]: r for r in replies}
    assert sorted(by_id) == [0, 1, 2, 3, 4, 5]
    texts = {i: by_id[i]["result"]["content"][0]["text"] for i in (1, 2, 3, 4, 5)}
    assert all(by_id[i]["result"]["isError"] for i in texts)
    failed = [r for r in caplog.records if r.name.startswith("mcp") and "Tool" in r.msg]
    assert len(failed) == 5
    if knob:
        for text in texts.values():
            assert "the memory is broken and takes no more calls: StorageError: " in text
            assert text.endswith("commit failed: database or disk is full")
        assert all(r.exc_info is None and r.levelno == logging.INFO for r in failed)
    else:  # (the second remember may have shared the first one's failed commit)
        assert texts[4] == "Error executing tool recall"
        assert texts[5] == "Error executing tool forget"
        assert sum(r.exc_info is not None for r in failed) >= 2


#: Makes every commit of the file fail (as a full disk).
DISK_FULL = """
from actormem._errors import StorageError
from actormem._storage import sqlite as sqlite_mod
def write(self, batch, wait, checkpoint=True):
    raise StorageError(self.path, "commit failed: database or disk is full")
sqlite_mod.SqliteStore._write = write
"""


def test_the_command_logs_one_line_per_failed_call(tmp_path: Path) -> None:
    """The real command on a file whose commits fail: one stderr line per failed call
    (before: a rich traceback box each), naming the cause."""
    n = 4
    lines = [_line(_init()), _line(INITIALIZED)]
    lines += [_line(_call(i + 1, "remember", {"text": f"entry {i}"})) for i in range(n)]
    run = subprocess.run(
        _script(tmp_path, DISK_FULL, "mcp", "--path", str(tmp_path / "m.db")),
        input="".join(lines),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    replies = {r["id"]: r for r in map(json.loads, run.stdout.splitlines())}
    assert sorted(replies) == list(range(n + 1))
    for i in range(1, n + 1):
        assert "database or disk is full" in replies[i]["result"]["content"][0]["text"]
    failed = [line for line in run.stderr.splitlines() if "Tool 'remember' failed" in line]
    assert len(failed) == n, run.stderr
    assert all(line.endswith("commit failed: database or disk is full'") for line in failed)
    assert "Traceback" not in run.stderr
