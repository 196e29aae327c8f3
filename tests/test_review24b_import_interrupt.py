"""review24b: Ctrl-C while the ``actormem`` command still imports its modules (numpy,
trio, rich: most of its first ~0.5 s) printed a KeyboardInterrupt traceback and the
process died of SIGINT; docs/swarm.md says a signal before the run starts "ends the
command with exit status 130 ... and one line". Found as a new user pressing Ctrl-C
right after starting ``actormem swarm``. The interrupt is raised here where
``run_command`` imports the command line's modules (``cli._main``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CODE = """
import builtins
real = builtins.__import__
def interrupted(name, globals=None, locals=None, fromlist=(), level=0):
    if name == "_main" and level == 1 and (globals or {}).get("__name__") == "actormem.cli":
        raise KeyboardInterrupt
    return real(name, globals, locals, fromlist, level)
builtins.__import__ = interrupted
from actormem.cli import run_command
run_command(%r)
"""


def _run(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", CODE % (argv,)], capture_output=True, text=True, env=env,
        cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip


def test_ctrl_c_while_the_command_imports_is_one_line_and_130(tmp_path: Path) -> None:
    done = _run(["swarm", "--episodes", "3"], tmp_path)
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == ["actormem swarm: interrupted (SIGINT)"]


def test_ctrl_c_while_importing_without_a_command(tmp_path: Path) -> None:
    done = _run([], tmp_path)
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == ["actormem: interrupted (SIGINT)"]
