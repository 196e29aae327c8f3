"""mcp27: ``actormem mcp``'s known defects from review25b, fixed.

1. A request whose id is not a string or an integer is answered -32600 (the id as sent
   when it is a number, else null) and not acted on (``_answer_to_bad_id``; knob
   ``_ANSWER_BAD_IDS``). The subprocess cases are in ``test_review25b_mcp.py``.
2. / 3. ``serve_stdio`` reads stdin on the event loop (``_PolledLines``; knob
   ``_POLL_STDIN``): a cancellation leaves no read behind, so a second serving gets the
   client's next lines and an asyncio program exits (``test_review25b_mcp.py``'s two
   scripts); here the reader itself, against a model, and both paths of the command.
4. ``serverInfo.version`` is the package's version (``actormem --version``'s).
"""

from __future__ import annotations

import collections
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install -e '.[test]')")

from mcp.shared.message import SessionMessage  # noqa: E402
from mcp.types import jsonrpc_message_adapter  # noqa: E402

import actormem._version as _version_mod  # noqa: E402
import actormem.integrations.mcp as mcp_mod  # noqa: E402
from actormem import open_memory  # noqa: E402
from actormem.integrations.mcp import build_mcp_server  # noqa: E402

from .strategies import examples
from .test_mcp25 import LONE, _script, _unreadable  # noqa: E402
from .test_tidy24a_mcp import INITIALIZED, _call, _init  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _line(message: dict[str, Any]) -> str:
    return json.dumps(message) + "\n"


# ------------------------------------------------------------- 1. ids of other types


async def _raw_session(server: Any, lines: list[str]) -> list[dict[str, Any]]:
    """Serve ``server`` over memory streams fed ``lines`` as the SDK's stdio transport
    parses them, with the raw lines beside (as ``serve_stdio`` has them); the replies."""
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](64)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](64)
    raw: collections.deque[str] = collections.deque()
    replies: list[dict[str, Any]] = []

    async def feed() -> None:
        async with to_server:
            for line in lines:
                try:
                    item: SessionMessage | Exception = SessionMessage(
                        jsonrpc_message_adapter.validate_json(line, by_name=False)
                    )
                except Exception as exc:
                    item = exc
                raw.append(line)
                await to_server.send(item)

    async def collect() -> None:
        async with from_server:
            async for item in from_server:
                replies.append(json.loads(item.message.model_dump_json(by_alias=True)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect)
        nursery.start_soon(feed)
        await mcp_mod._serve_streams(server, server_reads, server_writes, math.inf, raw)
    return replies


@pytest.mark.parametrize("answer", [True, False])
def test_a_request_with_a_bad_id_is_answered_and_not_acted_on(
    answer: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``remember`` with id ``true`` and a ``notifications/cancelled`` with id null
    (requests, both invalid): -32600 with id null each, the entry not stored, the
    request it names not cancelled. Knob off: no answer (the SDK took them for
    notifications), the requests around them answered alike."""
    monkeypatch.setattr(mcp_mod, "_ANSWER_BAD_IDS", answer)

    async def main() -> tuple[list[dict[str, Any]], int]:
        async with open_memory() as memory:
            bad_call = {**_call(1, "remember", {"text": "never stored"}), "id": True}
            bad_cancel = {
                "jsonrpc": "2.0",
                "id": None,
                "method": "notifications/cancelled",
                "params": {"requestId": 2},
            }
            lines = [_init(), INITIALIZED, bad_call, bad_cancel, _call(2, "stats", {})]
            replies = await _raw_session(build_mcp_server(memory), [_line(m) for m in lines])
            return replies, len(memory)

    replies, stored = trio.run(main)
    assert stored == 0
    errors = [(r["id"], r["error"]["code"]) for r in replies if "error" in r]
    assert errors == ([(None, -32600), (None, -32600)] if answer else [])
    assert [r["id"] for r in replies if "result" in r] == [0, 2]
    if answer:
        assert "not true" in replies[1]["error"]["data"]


@pytest.mark.parametrize(
    ("ident", "echoed"),
    [(3.5, 3.5), (-0.25, -0.25), (1e300, 1e300), (None, None), (False, None), ([], None)]
    + [({}, None), ("x", "x"), (7, 7)],
)
def test_the_id_an_answer_carries(ident: Any, echoed: Any) -> None:
    """JSON-RPC ids (a string, a finite number) come back as sent, others as null."""
    got = mcp_mod._echoed_id(ident)
    assert got == echoed
    assert type(got) is type(echoed)


def test_an_infinite_id_is_answered_with_null() -> None:
    """``1e999`` is read as infinity, which JSON cannot write back: id null."""
    assert mcp_mod._echoed_id(math.inf) is None
    line = '{"jsonrpc": "2.0", "id": 1e999, "method": "ping"}\n'
    item = SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    answer = mcp_mod._answer_to_bad_id(item, line)
    assert answer is not None
    assert json.loads(answer.model_dump_json(by_alias=True))["id"] is None


def test_a_line_that_is_not_the_items_gets_no_answer() -> None:
    """The guard against a line and an item out of step: the line's method must be the
    notification's; a true notification (no id) is never answered."""
    ping = '{"jsonrpc": "2.0", "id": 3.5, "method": "ping"}\n'
    note = SessionMessage(jsonrpc_message_adapter.validate_json(_line(INITIALIZED)))
    assert mcp_mod._answer_to_bad_id(note, ping) is None  # another method
    assert mcp_mod._answer_to_bad_id(note, _line(INITIALIZED)) is None  # no id
    request = SessionMessage(jsonrpc_message_adapter.validate_json(_line(_init())))
    assert mcp_mod._answer_to_bad_id(request, _line(_init())) is None  # not a notification
    assert mcp_mod._answer_to_bad_id(note, "[" * 100_000) is None  # (not JSON Python reads)


def test_a_number_id_is_written_back_as_sent() -> None:
    """The answer's JSON carries ``3.5`` (the SDK's own error type takes no such id)."""
    answer = mcp_mod._error(3.5, -32600, "Invalid Request", "x")
    assert json.loads(answer.model_dump_json(by_alias=True, exclude_unset=True))["id"] == 3.5
    plain = mcp_mod._error(4, -32600, "Invalid Request", "x")
    assert type(plain) is mcp_mod.JSONRPCError


def test_a_lone_surrogate_request_with_a_number_id_gets_its_id() -> None:
    """The parse error of an unreadable request follows the same rule for its id."""
    line = '{"jsonrpc": "2.0", "id": 2.5, "method": "x", "params": {' + LONE + "}}\n"
    answer = mcp_mod._answer_to_unreadable(_unreadable(line))
    assert answer is not None
    assert (answer.error.code, answer.id) == (-32700, 2.5)


# ------------------------------------------------------------- 2./3. the reader


def _model(data: bytes) -> list[str]:
    """The lines :class:`_PolledLines` hands out for input ``data``: split after each
    newline, the last without one if any, whitespace-only lines left out."""
    parts = data.split(b"\n")
    pieces = [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    return [p.decode("utf-8", errors="replace") for p in pieces if not p.isspace()]


async def _read_all(reader: Any) -> list[str]:
    got = []
    while line := await reader.readline():
        got.append(line)
    assert await reader.readline() == ""  # the end stays the end
    return got


def _pipe_with(data: bytes) -> int:
    """The read end of a pipe holding ``data``, its write end closed."""
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    return r


@settings(max_examples=examples(150), deadline=None)
@given(
    data=st.lists(
        st.sampled_from([b"a", b"\n", b" ", b"\r", b"{}", b"\xff", "é".encode(), b"\t"]),
        max_size=40,
    ).map(b"".join),
    size=st.integers(1, 9),
    backend=st.sampled_from(["trio", "asyncio"]),
)
def test_the_reader_against_a_model(data: bytes, size: int, backend: str) -> None:
    """Any input, read ``size`` bytes at a time, under trio or asyncio: the model's lines,
    also in :attr:`lines` for the raw-line answers."""
    r = _pipe_with(data)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mcp_mod, "_READ_SIZE", size)
            reader = mcp_mod._PolledLines(r)
            got = anyio.run(_read_all, reader, backend=backend)
    finally:
        os.close(r)
    assert got == _model(data)
    assert list(reader.lines) == got
    assert reader.unread() == b""


def test_a_regular_file_is_read_in_a_thread() -> None:
    """The event loop cannot wait on a regular file (EPERM): its lines come all the same."""
    with tempfile.TemporaryFile() as file:
        file.write(b'{"a": 1}\n\nlast')
        file.seek(0)
        for backend in ("trio", "asyncio"):
            file.seek(0)
            reader = mcp_mod._PolledLines(file.fileno())
            assert anyio.run(_read_all, reader, backend=backend) == ['{"a": 1}\n', "last"]
            assert not reader._pollable


def test_a_cancelled_read_leaves_the_next_bytes_to_the_next_reader() -> None:
    """A reader cancelled while it waits for a line: the bytes it had read and not handed
    out are given to the next one, and it takes nothing written after (before, the
    abandoned thread's ``readline`` went on and took it)."""
    r, w = os.pipe()

    async def main() -> tuple[str, str, str, bytes]:
        first = mcp_mod._PolledLines(r)
        os.write(w, b"one\ntwo\nthr")
        got_one = await first.readline()
        left = first.unread()
        second = mcp_mod._PolledLines(r, left)
        got_two = await second.readline()
        with trio.CancelScope() as scope:

            async def cancel_when_blocked() -> None:
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_when_blocked)
                await second.readline()  # waits for the rest of "thr..."
        assert scope.cancelled_caught
        os.write(w, b"ee\nfour\n")
        third = mcp_mod._PolledLines(r, second.unread())
        got_three = await third.readline()
        return got_one, got_two, got_three, third.unread()

    try:
        one, two, three, left = trio.run(main)
        # the first and second readers (cancelled) took nothing written after
        assert (one, two, three, left) == ("one\n", "two\n", "three\n", b"four\n")
    finally:
        os.close(r)
        os.close(w)


PAYLOAD = (
    (
        _line(_init())
        + _line(INITIALIZED)
        + "\n   \n"
        + "".join(_line(_call(i, "remember", {"text": f"note {i} é"})) for i in range(1, 40))
        + '{"jsonrpc": "2.0", "id": 40, "method": "tools/call", "params": {"name": "recall", '
        '"arguments": {"query": "note \xff"}}}\n'
        + json.dumps(_call(41, "stats", {}))  # the last line without its newline
    )
    .encode()
    .replace(b"\xc3\xbf", b"\xff")
)  # the query's byte: invalid UTF-8


def _command_answers(tmp_path: Path, prelude: str) -> tuple[int, list[dict[str, Any]], str]:
    command = _script(tmp_path, prelude, "mcp")
    proc = subprocess.run(
        command,
        input=PAYLOAD,
        capture_output=True,
        cwd=REPO,
        timeout=120,
    )
    answers = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    answers.sort(key=lambda a: a["id"])  # (the calls run concurrently)
    return proc.returncode, answers, proc.stderr.decode(errors="replace")


def test_both_readers_give_the_command_the_same_lines(tmp_path: Path) -> None:
    """``actormem mcp`` fed blank lines, invalid UTF-8 and a last line without a newline,
    read by the event loop (``_POLL_STDIN``) or the abandoned thread (the path before):
    the same answers."""
    runs = []
    for knob in (True, False):
        prelude = f"import actormem.integrations.mcp as m\nm._POLL_STDIN = {knob}"
        status, answers, err = _command_answers(tmp_path, prelude)
        assert status == 0, err
        runs.append(answers)
    on, off = runs
    assert [a["id"] for a in on] == list(range(42))
    for a, b in zip(on, off, strict=True):
        if a["id"] in (0, 41):  # initialize's reply, stats: the same fields
            assert a["result"].keys() == b["result"].keys()
        else:
            text_a = json.loads(a["result"]["content"][0]["text"])
            text_b = json.loads(b["result"]["content"][0]["text"])
            if a["id"] == 40:
                assert [h["memory"] for h in text_a["hits"]] == [
                    h["memory"] for h in text_b["hits"]
                ]
            else:
                assert text_a.keys() == text_b.keys() == {"id"}


# ------------------------------------------------------------- 4. serverInfo.version


def test_the_command_reports_the_packages_version(tmp_path: Path) -> None:
    """``serverInfo.version`` in the answer to ``initialize`` is ``actormem --version``'s
    (before: empty)."""
    version = subprocess.run(
        [sys.executable, "-m", "actormem", "--version"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout.split()[-1]
    run = subprocess.run(
        _script(tmp_path, "", "mcp"),
        input=_line(_init()),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    info = json.loads(run.stdout.splitlines()[0])["result"]["serverInfo"]
    assert info["version"] == version == _version_mod.package_version()
    assert version not in ("", "unknown")
    library = _initialize_reply(build_mcp_server(_Nothing()))["serverInfo"]
    assert library["version"] == version


class _Nothing:
    async def store(self, entry: Any) -> None:
        pass

    async def delete(self, id: Any) -> bool:
        return False

    async def retrieve_scored(self, query: str, limit: int = 5, **filters: Any) -> list[Any]:
        return []

    def statistics(self) -> Any:
        raise AssertionError("not called")


def _initialize_reply(server: Any) -> dict[str, Any]:
    replies = trio.run(_raw_session, server, [_line(_init())])
    assert replies[0]["id"] == 0
    result: dict[str, Any] = replies[0]["result"]
    return result


def test_a_chosen_version_is_reported() -> None:
    info = _initialize_reply(build_mcp_server(_Nothing(), version="9.9-test"))["serverInfo"]
    assert info == {**info, "name": "actormem", "version": "9.9-test"}
