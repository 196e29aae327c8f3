"""rev45b: ``serve_stdio``'s own stdout writer (``_StdoutAnswers``) on a stdout whose
file description is non-blocking (``O_NONBLOCK``, set by the client or by another
process sharing it, e.g. a terminal or a socket used for stdin and stdout both): an
answer longer than the pipe holds is written in full once the client reads, not ended
by ``BlockingIOError`` (``EAGAIN``) at the first full pipe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install -e '.[test]')")

from .test_tidy24a_mcp import INITIALIZED, _call, _init  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

SCRIPT = """
import sys, trio
sys.path.insert(0, {repo!r})
from actormem import open_memory
from actormem.integrations.mcp import build_mcp_server, serve_stdio

async def main():
    async with open_memory() as memory:
        server = build_mcp_server(memory)

        @server.tool()
        async def shout(text: str, times: int) -> str:
            return text * times

        await serve_stdio(server)

trio.run(main)
"""


def _line(message: dict[str, object]) -> bytes:
    return (json.dumps(message) + "\n").encode()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX descriptors")
def test_answers_longer_than_a_non_blocking_pipe_holds() -> None:
    """Three answers of 300,000 bytes each to a non-blocking pipe read only after a
    pause: all three arrive whole, and the serving ends 0 at the end of stdin."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # the file description stdout will share
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", SCRIPT.format(repo=str(REPO))],
            stdin=subprocess.PIPE,
            stdout=write_end,
            stderr=subprocess.PIPE,
        )
    finally:
        os.close(write_end)
    assert child.stdin is not None
    assert child.stderr is not None
    calls = [_call(i, "shout", {"text": "ab", "times": 150_000}) for i in (1, 2, 3)]
    child.stdin.write(b"".join(map(_line, [_init(), INITIALIZED, *calls])))
    child.stdin.close()
    time.sleep(2)  # the pipe fills meanwhile: the writer meets EAGAIN
    out = bytearray()
    with os.fdopen(read_end, "rb") as wire:
        while chunk := wire.read(1 << 16):
            out += chunk
    err = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    assert child.wait(timeout=120) == 0, err
    answers = [json.loads(line) for line in out.splitlines()]
    texts = {a["id"]: a["result"]["content"][0]["text"] for a in answers if a["id"] != 0}
    assert texts == {i: "ab" * 150_000 for i in (1, 2, 3)}, err[-2000:]
