"""stop32: ``actormem mcp`` started with SIGINT or SIGTERM ignored leaves it ignored.

A parent that starts the command with a stop signal ignored (``SIG_IGN``: a shell
without job control ignores SIGINT for ``actormem mcp &``; a supervisor may ignore
SIGTERM for its children) means the command not to stop on it. ``actormem mcp`` put its
own handlers on both (``trio.open_signal_receiver``, and its SIGTERM noting before trio
runs), so that signal ended it (exit 130 or 143), where ``actormem serve``, ``swarm`` and
``import`` leave it ignored. Now it serves on, and ends at the end of stdin (exit 0).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install -e '.[test]')")

from .test_mcp25 import _ended, _line, _script, _serving  # noqa: E402
from .test_tidy24a_mcp import _call  # noqa: E402


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_ignored_by_the_parent_stays_ignored(signum: int, tmp_path: Path) -> None:
    ignoring = f"import signal\nsignal.signal({int(signum)}, signal.SIG_IGN)"  # as inherited
    proc = _serving(_script(tmp_path, ignoring, "mcp", "--in-memory"))
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.send_signal(signum)
        proc.stdin.write(_line(_call(1, "stats", {})))
        proc.stdin.flush()
        answer = proc.stdout.readline()  # "" if the signal ended the command
    finally:
        proc.stdin.close()
    status, _, err = _ended(proc)
    assert answer, err
    assert json.loads(answer)["id"] == 1
    assert status == 0, err
    assert "interrupted" not in err
