"""review20a: what a new user met running ``actormem swarm`` into a pipe."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actormem.cli._main import EXIT_BROKEN_PIPE, main


class _ReaderGoneAfterHeader(io.StringIO):
    """stdout whose reader (``| head -3``) has gone once the swarm's three header lines
    were written: every later write meets EPIPE, as the results' tables do."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = False

    def write(self, text: str) -> int:
        if self.gone:
            raise BrokenPipeError(32, "Broken pipe")
        written = super().write(text)
        if "memory in RAM only" in self.getvalue() and text.endswith("\n"):
            self.gone = True
        return written

    def isatty(self) -> bool:
        return False


def test_swarm_tables_into_a_closed_pipe_exit_quietly_141(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `actormem swarm | head -1`: the reader goes while the run is on; the first write
    # after the run is a rich table. It must end as the other writes do (docs/cli.md:
    # 141, quietly), not with rich's SystemExit(1) in an exception group's traceback.
    out = _ReaderGoneAfterHeader()
    monkeypatch.setattr(sys, "stdout", out)
    argv = ["swarm", "--in-memory", "--episodes", "2", "--agents", "2", "--interval", "1000"]
    status = main(argv)
    assert out.gone
    assert status == EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_commands_with_stdout_closed_run_without_a_traceback(tmp_path: Path) -> None:
    # `actormem swarm >&-` (cron, a daemon): Python starts with sys.stdout None; the
    # command must run as with stdout to /dev/null, not die on None.isatty()/.flush().
    memory_file = tmp_path / "m.sqlite"
    runs = [
        ["swarm", "--in-memory", "--episodes", "2", "--agents", "2"],
        ["swarm", "--path", str(memory_file), "--episodes", "2", "--agents", "2"],
        ["stats", str(memory_file)],
    ]
    for argv in runs:
        done = subprocess.run(
            [sys.executable, "-m", "actormem", *argv],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            preexec_fn=lambda: os.close(1),  # noqa: PLW1509 (no threads in the child yet)
        )
        assert (done.returncode, done.stderr) == (0, ""), argv
