"""mainjob13: ``run_command`` ends a completed swarm with ``os._exit`` (``_FAST_EXIT``):
the same output, ``--json`` report and exit status as the interpreter's own exit; other
ways out (bad input, ``--version``) unchanged; ``main()`` in-process keeps nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
        timeout=120, check=False,
    )


def _command(tmp_path: Path, fast: bool, args: list[str]) -> tuple[int, str, str, object]:
    out = tmp_path / f"r-{fast}.json"
    code = (
        "import sys\n"
        "import actormem.cli._main as m\n"
        f"m._FAST_EXIT = {fast!r}\n"
        f"m.run_command({[*args, '--json', str(out)]!r})\n"
    )
    done = _python(code, cwd=tmp_path)
    report = json.loads(out.read_text()) if out.exists() else None
    return done.returncode, done.stdout, done.stderr, report


def _steady(report: object) -> object:
    """The report less what differs from run to run (times, CPU, latency, command)."""
    if not isinstance(report, dict):
        return report
    kept = {k: v for k, v in report.items() if k not in ("elapsed_s", "latency_ms", "command")}
    kept["options"] = {k: v for k, v in report["options"].items() if k not in ("json", "path")}
    kept["throughput"] = {
        k: v for k, v in report["throughput"].items()
        if k in ("agents", "episodes", "steps", "operations", "failures")
    }
    return kept


def _lines(stdout: str) -> list[str]:
    """Each line's first word: the tables' figures, widths and the CPU line vary with
    the run, their labels and rows do not (a border line is kept as its first char)."""
    words = [line.split(" ")[0] for line in stdout.splitlines()]
    return [w[:1] if w[:1] in ("┏", "┡", "└", "┗") else w for w in words]


def test_fast_exit_same_output_report_status(tmp_path: Path) -> None:
    """A durable swarm (its file closed before the exit) both ways."""
    # --episodes, not --steps: how many episodes a step budget lets start depends on the
    # agents' interleaving (review20a: 4 one way, 5 the other, under load)
    args = ["swarm", "--agents", "3", "--episodes", "5", "--interval", "600"]
    fast = _command(tmp_path, True, args)
    slow = _command(tmp_path, False, args)
    assert fast[0] == slow[0] == 0, (fast[2], slow[2])
    assert _lines(fast[1]) == _lines(slow[1])
    assert fast[1].rstrip().endswith("lost: 0")
    assert fast[2] == slow[2]
    assert _steady(fast[3]) == _steady(slow[3])


def test_fast_exit_runs_atexit_and_flushes(tmp_path: Path) -> None:
    """An ``atexit`` handler runs and buffered output reaches the pipe on the fast way."""
    code = (
        "import atexit, sys\n"
        "import actormem.cli._main as m\n"
        "atexit.register(lambda: print('at exit ran', flush=False))\n"
        "sys.stdout.write('buffered ')\n"
        "m.run_command(['swarm', '--agents', '2', '--steps', '10', '--in-memory',"
        " '--interval', '600'])\n"
    )
    done = _python(code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("buffered ")
    assert done.stdout.rstrip().endswith("at exit ran")


def test_fast_exit_not_taken_on_bad_input_or_other_commands(tmp_path: Path) -> None:
    for fast in (True,):
        code = (
            "import actormem.cli._main as m\n"
            f"m._FAST_EXIT = {fast!r}\n"
            "m.run_command(['swarm', '--agents', '0'])\n"
        )
        done = _python(code, cwd=tmp_path)
        assert done.returncode == 2
        code = (
            "import actormem.cli._main as m\n"
            f"m._FAST_EXIT = {fast!r}\n"
            "m.run_command(['--version'])\n"
        )
        done = _python(code, cwd=tmp_path)
        assert done.returncode == 0
        assert done.stdout.startswith("actormem ")


def test_main_in_process_keeps_nothing(tmp_path: Path) -> None:
    """``main()`` called in-process (not the process's command) keeps no objects for an
    exit that will not come."""
    from actormem.cli import _main

    before = len(_main._KEPT_FOR_EXIT)
    assert _main.main(["swarm", "--agents", "2", "--steps", "10", "--in-memory",
                       "--interval", "600"]) == 0
    assert len(_main._KEPT_FOR_EXIT) == before == 0
