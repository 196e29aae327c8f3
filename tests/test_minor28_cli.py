"""minor28: three CLI refusals.

* ``export --salvage`` of a file in a folder it cannot write (a read-only mount, a
  rescued disk) failed on its lock file, "cannot create the lock file ...: Permission
  denied", which did not say what to do; it says the folder is not writable and to
  salvage a copy, writing nothing. A FIFO given as the file hung (its open waits for a
  writer); it is refused.
* ``eval``'s refusals lacked the ``error:`` every other command's have (only its
  ``--json`` ones had it).
* ``--json`` naming a FIFO was accepted, and the command then hung at its end writing to
  it (the open waits for a reader); it is refused before the run. ``--json /dev/stdout``
  with stdout a pipe was refused ("not writable: /dev: No such file or directory").
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from actormem._outfile import check_figures_target
from actormem.cli._main import main
from tests.serverproc import REPO

_LINE = '{"category": "fact", "memory": "deploys go to blue"}\n'


def _ro_salvage(folder: Path, db: Path) -> subprocess.CompletedProcess[str]:
    """``actormem export --salvage db`` with ``folder`` read-only to the process (root's
    capability to ignore file permissions dropped first)."""
    code = (
        "import os, sys\n"
        "if os.geteuid() == 0:\n"
        "    from tests.crash_child import drop_dac_capabilities\n"
        "    drop_dac_capabilities()\n"
        "from actormem.cli._main import main\n"
        "sys.exit(main(['export', '--salvage', sys.argv[1]]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    folder.chmod(0o555)
    try:
        return subprocess.run(
            [sys.executable, "-c", code, str(db)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            env=env,
        )
    finally:
        folder.chmod(0o755)


@pytest.mark.skipif(sys.platform != "linux", reason="drops Linux capabilities when root")
def test_salvage_in_a_read_only_folder_says_so_and_writes_nothing() -> None:
    folder = Path(tempfile.mkdtemp(prefix="actormem-ro-"))  # outside pytest's 0700 tree
    try:
        dump = folder / "dump.jsonl"
        dump.write_text(_LINE)
        db = folder / "m.db"
        assert main(["import", str(db), str(dump)]) == 0
        folder.chmod(0o755)
        db.chmod(0o644)
        before = sorted(os.listdir(folder))
        done = _ro_salvage(folder, db)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert done.stderr == (
            f"actormem export: error: {db}: the directory is not writable (a salvage creates "
            "a .lock file beside the file, so that no memory opens it meanwhile): copy the "
            "file into a writable folder and salvage the copy\n"
        )
        assert sorted(os.listdir(folder)) == before
    finally:
        folder.chmod(0o755)
        for name in os.listdir(folder):
            os.unlink(folder / name)
        folder.rmdir()


@pytest.mark.timeout(60)  # before the fix the open waited for a writer for good
def test_salvage_refuses_a_fifo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "m.db"
    os.mkfifo(fifo)
    assert main(["export", "--salvage", str(fifo)]) == 2  # (it hung, waiting for a writer)
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        err
        == f"actormem export: error: {fifo}: not a regular file (a directory, a FIFO, a device)\n"
    )


def test_eval_refusals_say_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    for benchmark in ("locomo", "toolcalls"):
        assert main(["eval", benchmark, "--data", str(missing)]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"actormem eval {benchmark}: error: cannot read {missing}: No such file or directory\n"
        )
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([{"sample_id": "conv-1", "conversation": {}, "qa": []}]))
    assert main(["eval", "locomo", "--data", str(data), "--conversation", "conv-9"]) == 2
    assert capsys.readouterr().err == "actormem eval locomo: error: no conversation conv-9\n"


def test_json_refuses_a_fifo_a_socket_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    for target in (fifo, link):
        assert "is a FIFO" in (check_figures_target(target) or "")
        # the data is not read: the refusal comes first (it came at the end, hanging)
        status = main(["eval", "toolcalls", "--data", str(tmp_path / "x"), "--json", str(target)])
        assert status == 2
        assert capsys.readouterr().err == (
            f"actormem eval toolcalls: error: --json {target}: is a FIFO, not a file: writing "
            "to it would wait until a program reads it (name a file, or /dev/stdout to pipe "
            "the figures)\n"
        )
    with socket.socket(socket.AF_UNIX) as sock:
        path = tmp_path / "sock"
        sock.bind(str(path))
        assert check_figures_target(path) == "is a socket, not a file (name a file)"
    assert check_figures_target(os.devnull) is None


def test_json_to_dev_stdout_through_a_pipe_is_written() -> None:
    code = (
        "import sys\n"
        "from actormem._outfile import check_figures_target, write_figures\n"
        "refusal = check_figures_target('/dev/stdout')\n"
        "assert refusal is None, refusal\n"
        "write_figures('/dev/stdout', '{\"command\": \"actormem x\"}\\n')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"command": "actormem x"}
