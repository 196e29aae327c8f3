"""minor32: a SIGINT while the ``actormem`` command is still starting ends it with one
line and status 130 from the first line of :func:`actormem.cli.run_command` on.

``run_command`` imported ``actormem._util`` before its ``try``: a Ctrl-C during that
import printed a ``KeyboardInterrupt`` traceback and the process died of SIGINT
(returncode -2), where docs/cli.md promises 130 and one line. The child here holds
the import of a module (a finder first on ``sys.meta_path`` writes a flag file, then
sleeps) and a real SIGINT is sent once the flag exists: the signal lands inside that
import, whatever the machine's speed. What comes before ``run_command`` (the
interpreter's start-up, ``import actormem.cli``) is the window docs/cli.md names."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CODE = """
import os, sys, time
hold, flag = sys.argv[1], sys.argv[2]
class Hold:
    def find_spec(self, name, path=None, target=None):
        if name == hold:
            sys.meta_path.remove(self)
            open(flag, "w").close()
            time.sleep(120)  # the SIGINT comes here, inside the import of `hold`
        return None
sys.meta_path.insert(0, Hold())
del sys.argv[1:3]
import runpy
runpy.run_module("actormem", run_name="__main__", alter_sys=True)
"""


def _interrupted_at(hold: str, argv: list[str], tmp_path: Path) -> tuple[int, str]:
    flag = tmp_path / f"held-{hold}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CODE, hold, str(flag), *argv], env=env, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not a measurement
        while not flag.exists():
            assert child.poll() is None, f"{hold} was not imported: {child.communicate()}"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, err


@pytest.mark.parametrize(
    "hold",
    [
        "actormem._util",  # run_command's first import (was before its try)
        "actormem.cli._main",  # the command line's modules (review24b)
        "trio",  # deep in them
    ],
)
def test_sigint_while_the_command_starts_is_one_line_and_130(tmp_path: Path, hold: str) -> None:
    status, err = _interrupted_at(hold, ["stats", str(tmp_path / "none.db")], tmp_path)
    assert status == 130, err
    assert err.splitlines() == ["actormem stats: interrupted (SIGINT)"], err


def test_sigint_while_starting_without_a_command(tmp_path: Path) -> None:
    status, err = _interrupted_at("actormem._util", [], tmp_path)
    assert status == 130, err
    assert err.splitlines() == ["actormem: interrupted (SIGINT)"], err
