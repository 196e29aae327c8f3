"""robust42: a SIGTERM while ``serve_http`` still opens its memory (before it listens)
stops the server once the memory is open, cleanly (it never listens; the memory closes,
committed), where its default action ended the process (docs/server.md's known limit
until then; a subprocess sees status -15). SIGINT still interrupts the open.

The child's open waits for a line on its stdin (the memory's real open then), so the
signal lands while it opens; the 30 s bounds only keep a failure from hanging the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

_GUARD = 30.0  # seconds: a hang guard, not a timing assertion

_CHILD = r"""
import signal
import sys
import trio

if sys.argv[2:] == ["ignored"]:  # as a parent that ignores SIGTERM leaves it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
from actormem.server import _run

real = _run.open_memory


class _Slow:
    def __init__(self, options):
        self.inner = real(**options)

    async def __aenter__(self):
        print("opening", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        return await self.inner.__aenter__()

    async def __aexit__(self, *exc):
        return await self.inner.__aexit__(*exc)


_run.open_memory = lambda **options: _Slow(options)
ready = []


def on_ready(binds):
    ready.extend(binds)
    print("ready", flush=True)


trio.run(lambda: _run.serve_http(path=sys.argv[1], port=0, on_ready=on_ready))
print("returned", len(ready), flush=True)
"""


def test_a_sigterm_while_the_memory_opens_stops_the_server_once_open(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:  # its pipes closed and waited for at the end
        try:
            assert child.stdout is not None
            assert child.stderr is not None
            assert child.stdin is not None
            assert child.stdout.readline() == "opening\n"
            os.kill(child.pid, signal.SIGTERM)
            line = child.stderr.readline()  # "" if the signal ended the process
            assert "SIGTERM received, stopping" in line, line
            child.stdin.write("\n")  # the open goes on
            child.stdin.flush()
            out, err = child.communicate(timeout=_GUARD)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 0, err
    assert out == "returned 0\n"  # never listened
    assert db.exists()  # opened (created) and closed


def test_an_ignored_sigterm_stays_ignored_while_the_memory_opens(tmp_path: Path) -> None:
    """A SIGTERM its parent ignored (``SIG_IGN``) is still ignored: the server opens,
    listens, and a SIGINT stops it."""
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path / "m.db"), "ignored"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:  # its pipes closed and waited for at the end
        try:
            assert child.stdout is not None
            assert child.stdin is not None
            assert child.stdout.readline() == "opening\n"
            os.kill(child.pid, signal.SIGTERM)
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline() == "ready\n"
            os.kill(child.pid, signal.SIGINT)
            out, err = child.communicate(timeout=_GUARD)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 0, err
    assert out == "returned 1\n"
    assert "SIGTERM" not in err
    assert "SIGINT received, stopping" in err
